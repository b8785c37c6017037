package exnref

import "fmt"

// exnRef is the encoding of the exnref value type.
const exnRef = "\x69"

// blockType is a decoded block type.
type blockType struct {
	raw []byte // encoding as found in the input
	funcType
}

// decodeBlockType decodes the block type encoded in raw.
func (m *module) decodeBlockType(raw []byte) (blockType, error) {
	bt := blockType{raw: raw}
	r := reader{b: raw}
	switch v := r.s33(); {
	case v == -64: // 0x40: [] -> []
	case v < 0: // a value type
		bt.results = []string{string(raw)}
	case v < int64(len(m.types)):
		bt.funcType = m.types[v]
	default:
		return bt, fmt.Errorf("%w: block type index %d out of range", ErrMalformed, v)
	}
	return bt, nil
}

// typeTable is the module's type section plus the function types the
// translation adds to it for block types with parameters or several
// results.
type typeTable struct {
	types []funcType
	index map[string]uint32 // encoding -> first index with it
	added []funcType
}

func newTypeTable(types []funcType) *typeTable {
	t := &typeTable{types: types, index: make(map[string]uint32, len(types))}
	for i, ft := range types {
		key := string(ft.encode(nil))
		if _, ok := t.index[key]; !ok {
			t.index[key] = uint32(i)
		}
	}
	return t
}

// needsIndex reports whether a block of type ft must name a type index
// (it cannot be written as 0x40 or a single value type).
func needsIndex(ft funcType) bool {
	return len(ft.params) > 0 || len(ft.results) > 1
}

// add makes sure ft is in the table.
func (t *typeTable) add(ft funcType) {
	key := string(ft.encode(nil))
	if _, ok := t.index[key]; ok {
		return
	}
	t.index[key] = uint32(len(t.types) + len(t.added))
	t.added = append(t.added, ft)
}

// appendBlockType appends the block type encoding of ft. A type that needs
// an index must have been added before; appendBlockType only reads the
// table, so concurrent calls are safe.
func (t *typeTable) appendBlockType(b []byte, ft funcType) []byte {
	switch {
	case !needsIndex(ft) && len(ft.results) == 0:
		return append(b, 0x40)
	case !needsIndex(ft):
		return append(b, ft.results[0]...)
	}
	idx, ok := t.index[string(ft.encode(nil))]
	if !ok {
		panic("exnref: block type not added to the type table")
	}
	return appendS33(b, int64(idx))
}
