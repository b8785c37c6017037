package exnref

import (
	"fmt"
	"strconv"
	"strings"
)

// A tiny assembler for the test modules: whitespace-separated tokens, each a
// mnemonic, a value type, a type index (t4) or a number; ";;" starts a
// comment. 0x.. is a raw byte. Other numbers after i32.const and i64.const are signed LEB128, all
// others unsigned.

var mnemonics = map[string]byte{
	"unreachable": 0x00, "nop": 0x01, "block": 0x02, "loop": 0x03, "if": 0x04,
	"else": 0x05, "try": 0x06, "catch": 0x07, "throw": 0x08, "rethrow": 0x09,
	"throw_ref": 0x0a, "end": 0x0b, "br": 0x0c, "br_if": 0x0d, "br_table": 0x0e,
	"return": 0x0f, "call": 0x10, "delegate": 0x18, "catch_all": 0x19,
	"drop": 0x1a, "try_table": 0x1f, "local.get": 0x20, "local.set": 0x21,
	"local.tee": 0x22, "i32.const": 0x41, "i64.const": 0x42, "i32.eqz": 0x45,
	"i32.lt_s": 0x48, "i32.add": 0x6a, "i32.sub": 0x6b, "i32.mul": 0x6c,
	"i32.wrap_i64": 0xa7, "void": 0x40, "i32": 0x7f, "i64": 0x7e, "exnref": 0x69,
}

func asm(src string) []byte {
	var out []byte
	signed := false
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, ";;"); i >= 0 {
			line = line[:i]
		}
		for _, tok := range strings.Fields(line) {
			if op, ok := mnemonics[tok]; ok {
				out = append(out, op)
				signed = tok == "i32.const" || tok == "i64.const"
				continue
			}
			if strings.HasPrefix(tok, "t") {
				n, err := strconv.ParseUint(tok[1:], 10, 32)
				if err != nil {
					panic(fmt.Sprintf("asm: bad token %q", tok))
				}
				out = appendS33(out, int64(n))
				continue
			}
			if strings.HasPrefix(tok, "0x") {
				b, err := strconv.ParseUint(tok[2:], 16, 8)
				if err != nil {
					panic(fmt.Sprintf("asm: bad token %q", tok))
				}
				out = append(out, byte(b))
				continue
			}
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("asm: bad token %q", tok))
			}
			if signed {
				out = appendS33(out, n)
			} else {
				out = appendU32(out, uint32(n))
			}
			signed = false
		}
	}
	return out
}

// testFunc is a function of a test module.
type testFunc struct {
	typ    uint32
	locals string // value types of the locals, as asm tokens
	body   string // asm, with the final end
}

// Types, import and tags every test module has:
//
//	type 0: [] -> [i32]            tag 0: [i32]
//	type 1: [i32] -> []            tag 1: [i32 i64]
//	type 2: [i32 i64] -> []        tag 2: []
//	type 3: [] -> []
//	type 4: [i32] -> [i32]
//	func 0: import env.log [i32] -> []
//
// The module's own functions follow, exported as f1, f2, ... by function
// index.
var testTypes = []funcType{
	{results: []string{"\x7f"}},
	{params: []string{"\x7f"}},
	{params: []string{"\x7f", "\x7e"}},
	{},
	{params: []string{"\x7f"}, results: []string{"\x7f"}},
}

func buildModule(funcs []testFunc) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	var s []byte

	s = appendU32(nil, uint32(len(testTypes)))
	for _, t := range testTypes {
		s = t.encode(s)
	}
	out = appendSection(out, secType, s)

	s = appendU32(nil, 1)
	s = append(s, 3, 'e', 'n', 'v', 3, 'l', 'o', 'g', 0, 1)
	out = appendSection(out, secImport, s)

	s = appendU32(nil, uint32(len(funcs)))
	for _, f := range funcs {
		s = appendU32(s, f.typ)
	}
	out = appendSection(out, secFunction, s)

	s = append(appendU32(nil, 3), 0, 1, 0, 2, 0, 3)
	out = appendSection(out, secTag, s)

	s = appendU32(nil, uint32(len(funcs)))
	for i := range funcs {
		name := fmt.Sprintf("f%d", i+1)
		s = appendU32(s, uint32(len(name)))
		s = append(s, name...)
		s = append(s, 0)
		s = appendU32(s, uint32(i+1))
	}
	out = appendSection(out, 7, s)

	s = appendU32(nil, uint32(len(funcs)))
	for _, f := range funcs {
		locals := asm(f.locals)
		body := appendU32(nil, uint32(len(locals)))
		for _, l := range locals {
			body = append(body, 1, l)
		}
		body = append(body, asm(f.body)...)
		s = appendU32(s, uint32(len(body)))
		s = append(s, body...)
	}
	return appendSection(out, secCode, s)
}
