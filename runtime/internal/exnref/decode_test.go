package exnref

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// TestDecodeLengths checks that the decoder finds where each instruction
// ends, for every kind of immediate.
func TestDecodeLengths(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		op   opcode
	}{
		{"unreachable", "00", 0x00},
		{"block void", "0240", opBlock},
		{"block i32", "027f", opBlock},
		{"block (ref null func)", "02 63 70", opBlock},
		{"block type index 200", "02 c801", opBlock},
		{"loop exnref", "0369", opLoop},
		{"if", "0440", opIf},
		{"try", "0640", opTry},
		{"catch 300", "07 ac02", opCatch},
		{"throw", "0801", opThrow},
		{"rethrow", "0902", opRethrow},
		{"throw_ref", "0a", opThrowRef},
		{"br padded", "0c 8080808000", opBr},
		{"br_table", "0e 03 00 01 02 8001", opBrTable},
		{"call", "10 ffffffff0f", 0x10},
		{"call_indirect", "11 05 00", 0x11},
		{"return_call", "12 07", 0x12},
		{"return_call_indirect", "13 05 01", 0x13},
		{"call_ref", "14 05", 0x14},
		{"delegate", "18 00", opDelegate},
		{"catch_all", "19", opCatchAll},
		{"select t", "1c 02 7f 63 70", 0x1c},
		{"try_table", "1f 40 03 00 01 00 01 02 03 03 04", opTryTable},
		{"local.get", "20 8001", opLocalGet},
		{"table.get", "25 00", 0x25},
		{"i32.load", "28 02 8080808000", 0x28},
		{"i64.store32 multi-memory", "3e 42 01 10", 0x3e},
		{"i64.load memory64 offset", "29 03 ffffffffffffffffff01", 0x29},
		{"memory.grow", "40 00", 0x40},
		{"i32.const", "41 7f", 0x41},
		{"i32.const 5 bytes", "41 ffffffff07", 0x41},
		{"i64.const", "42 ffffffffffffffffff00", 0x42},
		{"f32.const", "43 0000803f", 0x43},
		{"f64.const", "44 000000000000f03f", 0x44},
		{"i64.extend32_s", "c4", 0xc4},
		{"ref.null", "d0 70", 0xd0},
		{"ref.func", "d2 0a", 0xd2},
		{"br_on_null", "d5 01", opBrOnNull},
		{"i32.trunc_sat_f32_s", "fc 00", 0xfc0000},
		{"memory.init", "fc 08 03 00", 0xfc0008},
		{"data.drop", "fc 09 03", 0xfc0009},
		{"memory.copy", "fc 0a 00 00", 0xfc000a},
		{"memory.fill", "fc 0b 00", 0xfc000b},
		{"table.init", "fc 0c 01 00", 0xfc000c},
		{"elem.drop", "fc 0d 01", 0xfc000d},
		{"table.copy", "fc 0e 00 00", 0xfc000e},
		{"table.grow", "fc 0f 00", 0xfc000f},
		{"table.fill", "fc 11 00", 0xfc0011},
		{"v128.load", "fd 00 04 10", 0xfd0000},
		{"v128.store", "fd 0b 04 10", 0xfd000b},
		{"v128.const", "fd 0c 000102030405060708090a0b0c0d0e0f", 0xfd000c},
		{"i8x16.shuffle", "fd 0d 000102030405060708090a0b0c0d0e0f", 0xfd000d},
		{"i8x16.swizzle", "fd 0e", 0xfd000e},
		{"i8x16.extract_lane_s", "fd 15 0f", 0xfd0015},
		{"f64x2.replace_lane", "fd 22 01", 0xfd0022},
		{"i8x16.eq", "fd 23", 0xfd0023},
		{"v128.load8_lane", "fd 54 00 00 07", 0xfd0054},
		{"v128.store64_lane", "fd 5b 03 08 01", 0xfd005b},
		{"v128.load32_zero", "fd 5c 02 00", 0xfd005c},
		{"v128.load64_zero", "fd 5d 03 00", 0xfd005d},
		{"f32x4.demote_f64x2_zero", "fd 5e", 0xfd005e},
		{"i16x8.extadd_pairwise_i8x16_s two-byte sub-opcode", "fd 7c", 0xfd007c},
		{"i32x4.dot_i16x8_s", "fd ba01", 0xfd00ba},
		{"f64x2.convert_low_i32x4_u", "fd ff01", 0xfd00ff},
		{"i8x16.relaxed_swizzle", "fd 8002", 0xfd0100},
		{"memory.atomic.notify", "fe 00 02 00", 0xfe0000},
		{"atomic.fence", "fe 03 00", 0xfe0003},
		{"i64.atomic.rmw32.cmpxchg_u", "fe 4e 02 04", 0xfe004e},
	}
	for _, tc := range tests {
		b, err := hex.DecodeString(strings.ReplaceAll(tc.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		// Followed by a nop, which must stay undecoded.
		d := decoder{reader{b: append(b, 0x01)}}
		in := d.next()
		if d.err != nil || in.op != tc.op || in.start != 0 || in.end != len(b) || d.pos != len(b) {
			t.Errorf("%s: op %v [%d, %d) err %v, want op %v [0, %d)", tc.name, in.op, in.start, in.end, d.err, tc.op, len(b))
		}
		// Every prefix is an error, never an instruction.
		for n := 0; n < len(b); n++ {
			d := decoder{reader{b: b[:n:n]}}
			if in := d.next(); d.err == nil {
				t.Errorf("%s truncated to %d bytes: decoded %v", tc.name, n, in.op)
			}
		}
	}
}

func TestDecodeUnknown(t *testing.T) {
	for _, h := range []string{"27", "c5", "fb00", "fc12", "fd9a01", "fdee01", "fd9402", "fe04", "fe4f", "ff"} {
		b, _ := hex.DecodeString(h)
		d := decoder{reader{b: b}}
		d.next()
		if !errors.Is(d.err, ErrMalformed) || !strings.Contains(d.err.Error(), "unknown opcode") {
			t.Errorf("%s: %v, want an unknown opcode error", h, d.err)
		}
	}
}
