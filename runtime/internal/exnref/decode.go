package exnref

import "fmt"

// opcode is an instruction's opcode. Prefixed instructions (0xfc, 0xfd,
// 0xfe) carry the prefix in bits 16-23 and the sub-opcode below.
type opcode uint32

// The opcodes the translation looks at; every other instruction is copied
// through byte for byte.
const (
	opBlock       opcode = 0x02
	opLoop        opcode = 0x03
	opIf          opcode = 0x04
	opElse        opcode = 0x05
	opTry         opcode = 0x06 // legacy
	opCatch       opcode = 0x07 // legacy
	opThrow       opcode = 0x08
	opRethrow     opcode = 0x09 // legacy
	opThrowRef    opcode = 0x0a
	opEnd         opcode = 0x0b
	opBr          opcode = 0x0c
	opBrIf        opcode = 0x0d
	opBrTable     opcode = 0x0e
	opReturn      opcode = 0x0f
	opDelegate    opcode = 0x18 // legacy
	opCatchAll    opcode = 0x19 // legacy
	opTryTable    opcode = 0x1f
	opLocalGet    opcode = 0x20
	opLocalSet    opcode = 0x21
	opBrOnNull    opcode = 0xd5
	opBrOnNonNull opcode = 0xd6
)

// Catch clause kinds of try_table.
const (
	catchTag    byte = 0x00
	catchTagRef byte = 0x01
	catchAll    byte = 0x02
	catchAllRef byte = 0x03
)

func (op opcode) String() string {
	if op > 0xff {
		return fmt.Sprintf("0x%02x 0x%x", uint32(op>>16), uint32(op&0xffff))
	}
	return fmt.Sprintf("0x%02x", uint32(op))
}

// isLegacy reports whether op belongs to legacy exception handling only.
func (op opcode) isLegacy() bool {
	switch op {
	case opTry, opCatch, opRethrow, opDelegate, opCatchAll:
		return true
	}
	return false
}

// instr is one decoded instruction: its opcode, its byte range in the body,
// and for the control instructions the translation rewrites, the position
// of its first immediate.
type instr struct {
	op         opcode
	start, end int // [start, end) in the function body
	imm        int // offset of the first immediate
}

// decoder walks the instructions of one function body.
type decoder struct {
	reader
}

// next decodes the instruction at d.pos. Unknown opcodes fail the decoder
// with an error naming the opcode.
func (d *decoder) next() instr {
	in := instr{start: d.pos}
	c := d.byte()
	in.op = opcode(c)
	in.imm = d.pos
	switch {
	case c >= 0x45 && c <= 0xc4: // numeric, sign extension: no immediates
	case c >= 0x28 && c <= 0x3e: // loads and stores
		d.memarg()
	default:
		switch c {
		case 0x00, 0x01, 0x05, 0x0a, 0x0b, 0x0f, 0x19, 0x1a, 0x1b, 0xd1, 0xd3, 0xd4:
			// unreachable nop else throw_ref end return catch_all drop select
			// ref.is_null ref.eq ref.as_non_null
		case 0x02, 0x03, 0x04, 0x06: // block loop if try
			d.blockType()
		case 0x1f: // try_table
			d.blockType()
			for n := d.u32(); n > 0 && d.err == nil; n-- {
				switch k := d.byte(); k {
				case catchTag, catchTagRef:
					d.u32()
					d.u32()
				case catchAll, catchAllRef:
					d.u32()
				default:
					d.fail("unknown catch kind 0x%02x", k)
				}
			}
		case 0x07, 0x08, 0x09, 0x0c, 0x0d, 0x18, 0xd5, 0xd6:
			// catch throw rethrow br br_if delegate br_on_null br_on_non_null
			d.u32()
		case 0x0e: // br_table
			for n := d.u32(); n > 0 && d.err == nil; n-- {
				d.u32()
			}
			d.u32()
		case 0x10, 0x12, 0x14, 0x15, 0xd2: // call return_call call_ref return_call_ref ref.func
			d.u32()
		case 0x11, 0x13: // call_indirect return_call_indirect
			d.u32()
			d.u32()
		case 0x1c: // select t*
			for n := d.u32(); n > 0 && d.err == nil; n-- {
				d.valType()
			}
		case 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26: // local.* global.* table.get table.set
			d.u32()
		case 0x3f, 0x40: // memory.size memory.grow
			d.u32()
		case 0x41: // i32.const
			d.skipLEB(5)
		case 0x42: // i64.const
			d.skipLEB(10)
		case 0x43: // f32.const
			d.skip(4)
		case 0x44: // f64.const
			d.skip(8)
		case 0xd0: // ref.null ht
			d.s33()
		case 0xfc:
			in.op = d.prefixed(0xfc)
		case 0xfd:
			in.op = d.prefixed(0xfd)
		case 0xfe:
			in.op = d.prefixed(0xfe)
		default:
			d.unknown(in.op, in.start)
		}
	}
	in.end = d.pos
	return in
}

func (d *decoder) unknown(op opcode, at int) {
	if d.err == nil {
		d.pos = at
		d.err = fmt.Errorf("%w: unknown opcode %v at offset %d", ErrMalformed, op, at)
	}
}

// blockType skips a block type: 0x40, a value type or a type index.
func (d *decoder) blockType() {
	if v := d.s33(); v == -29 || v == -28 { // (ref null ht), (ref ht)
		d.s33()
	}
}

// memarg skips a memory argument: alignment (with bit 6 announcing a memory
// index, multi-memory) and offset (64 bits wide under memory64).
func (d *decoder) memarg() {
	if d.u32()&0x40 != 0 {
		d.u32()
	}
	d.skipLEB(10)
}

// prefixed decodes the sub-opcode and immediates of a 0xfc, 0xfd or 0xfe
// instruction.
func (d *decoder) prefixed(prefix byte) opcode {
	at := d.pos - 1
	sub := d.u32()
	op := opcode(prefix)<<16 | opcode(sub)
	if d.err != nil {
		return op
	}
	switch prefix {
	case 0xfc: // saturating truncation, bulk memory, tables
		switch {
		case sub <= 7: // i32.trunc_sat_f32_s ... i64.trunc_sat_f64_u
		case sub == 8: // memory.init data mem
			d.u32()
			d.u32()
		case sub == 9: // data.drop
			d.u32()
		case sub == 10: // memory.copy mem mem
			d.u32()
			d.u32()
		case sub == 11: // memory.fill mem
			d.u32()
		case sub == 12: // table.init elem table
			d.u32()
			d.u32()
		case sub == 13: // elem.drop
			d.u32()
		case sub == 14: // table.copy table table
			d.u32()
			d.u32()
		case sub >= 15 && sub <= 17: // table.grow table.size table.fill
			d.u32()
		default:
			d.unknown(op, at)
		}
	case 0xfd: // SIMD
		switch {
		case sub <= 11 || sub == 92 || sub == 93: // v128.load*, v128.store, v128.load{32,64}_zero
			d.memarg()
		case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
			d.skip(16)
		case sub >= 21 && sub <= 34: // extract_lane, replace_lane
			d.skip(1)
		case sub >= 84 && sub <= 91: // v128.load*_lane, v128.store*_lane
			d.memarg()
			d.skip(1)
		case sub <= 0xff && !simdGap(sub): // no immediates
		case sub >= 0x100 && sub <= 0x113: // relaxed SIMD: no immediates
		default:
			d.unknown(op, at)
		}
	case 0xfe: // threads
		switch {
		case sub == 3: // atomic.fence
			if d.byte() != 0 {
				d.fail("atomic.fence: bad reserved byte")
			}
		case sub <= 2 || (sub >= 0x10 && sub <= 0x4e): // wait, notify, loads, stores, rmw
			d.memarg()
		default:
			d.unknown(op, at)
		}
	}
	return op
}

// simdGap reports the unassigned SIMD opcodes below 0x100.
func simdGap(sub uint32) bool {
	switch sub {
	case 0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee:
		return true
	}
	return false
}
