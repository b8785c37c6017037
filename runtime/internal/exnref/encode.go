package exnref

import "fmt"

// encode returns the module with the given function bodies and, appended to
// the type section, the given function types. All other sections are
// copied as they are.
func (m *module) encode(bodies [][]byte, newTypes []funcType) ([]byte, error) {
	size := len(m.b)
	for i, b := range bodies {
		size += len(b) - len(m.bodies[i])
	}
	out := make([]byte, 0, size+64*len(newTypes)+16)
	out = append(out, m.b[:8]...)
	hasTypes := false
	for i, s := range m.sections {
		switch {
		case s.id == secType && len(newTypes) > 0:
			hasTypes = true
			r := reader{b: m.b[s.payloadStart:s.end]}
			n := r.u32()
			payload := appendU32(nil, n+uint32(len(newTypes)))
			payload = append(payload, r.b[r.pos:]...)
			for _, ft := range newTypes {
				payload = ft.encode(payload)
			}
			out = appendSection(out, secType, payload)
		case i == m.codeSection:
			n := sizeU32(uint32(len(bodies)))
			for _, b := range bodies {
				n += sizeU32(uint32(len(b))) + len(b)
			}
			out = append(out, secCode)
			out = appendU32(out, uint32(n))
			out = appendU32(out, uint32(len(bodies)))
			for _, b := range bodies {
				out = appendU32(out, uint32(len(b)))
				out = append(out, b...)
			}
		default:
			out = append(out, m.b[s.start:s.end]...)
		}
	}
	if len(newTypes) > 0 && !hasTypes {
		return nil, fmt.Errorf("%w: no type section", ErrMalformed)
	}
	return out, nil
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(payload)))
	return append(out, payload...)
}
