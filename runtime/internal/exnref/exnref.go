package exnref

import "fmt"

// Version identifies what Translate produces. It changes whenever a change
// to this package changes Translate's output for some input, so that
// caches of translations (keyed by input hash and Version) are not reused
// across such a change.
const Version = "1"

// Translate returns module with every legacy exception-handling construct
// rewritten to the exnref form. A module without legacy EH is returned
// unchanged (same slice).
func Translate(module []byte) ([]byte, error) {
	m, err := parseModule(module)
	if err != nil {
		return nil, err
	}
	legacy, err := scanAll(m)
	if err != nil {
		return nil, err
	}
	var fns []int // defined functions that use legacy EH
	for i, l := range legacy {
		if l {
			fns = append(fns, i)
		}
	}
	if len(fns) == 0 {
		return module, nil
	}

	// Analyse in parallel; add the block types the new blocks need in
	// function order, so the output does not depend on scheduling; then
	// emit in parallel.
	lowerings := make([]*lowering, len(fns))
	err = parallel(len(fns), func(i int) (err error) {
		lowerings[i], err = newLowering(m, fns[i])
		return err
	})
	if ie, ok := err.(*indexedError); ok {
		return nil, fmt.Errorf("function %d: %w", m.nFuncImports+uint32(fns[ie.i]), ie.err)
	}
	types := newTypeTable(m.types)
	for _, l := range lowerings {
		for _, ft := range l.blockTypes() {
			types.add(ft)
		}
	}
	bodies := make([][]byte, len(m.bodies))
	copy(bodies, m.bodies)
	_ = parallel(len(fns), func(i int) error {
		bodies[fns[i]] = lowerings[i].emit(types)
		lowerings[i] = nil
		return nil
	})
	return m.encode(bodies, types.added)
}

// HasLegacy reports whether module's code uses legacy exception handling.
// It decodes every function body, so it also fails on code it could not
// translate.
func HasLegacy(module []byte) (bool, error) {
	m, err := parseModule(module)
	if err != nil {
		return false, err
	}
	legacy, err := scanAll(m)
	if err != nil {
		return false, err
	}
	for _, l := range legacy {
		if l {
			return true, nil
		}
	}
	return false, nil
}
