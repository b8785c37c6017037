package ipc

import (
	"encoding/binary"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// writer appends msgpack primitives to a byte slice, always choosing the
// shortest encoding. Appending cannot fail; size limits are enforced by the
// callers (see writer.value and Encode).
type writer struct {
	b []byte
}

func (w *writer) nil() { w.b = append(w.b, msgpcode.Nil) }

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, msgpcode.True)
	} else {
		w.b = append(w.b, msgpcode.False)
	}
}

func (w *writer) uint(v uint64) {
	switch {
	case v <= uint64(msgpcode.PosFixedNumHigh):
		w.b = append(w.b, byte(v))
	case v <= math.MaxUint8:
		w.b = append(w.b, msgpcode.Uint8, byte(v))
	case v <= math.MaxUint16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, msgpcode.Uint16), uint16(v))
	case v <= math.MaxUint32:
		w.b = binary.BigEndian.AppendUint32(append(w.b, msgpcode.Uint32), uint32(v))
	default:
		w.b = binary.BigEndian.AppendUint64(append(w.b, msgpcode.Uint64), v)
	}
}

func (w *writer) int(v int64) {
	switch {
	case v >= 0:
		w.uint(uint64(v))
	case v >= -32:
		w.b = append(w.b, byte(int8(v)))
	case v >= math.MinInt8:
		w.b = append(w.b, msgpcode.Int8, byte(int8(v)))
	case v >= math.MinInt16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, msgpcode.Int16), uint16(int16(v)))
	case v >= math.MinInt32:
		w.b = binary.BigEndian.AppendUint32(append(w.b, msgpcode.Int32), uint32(int32(v)))
	default:
		w.b = binary.BigEndian.AppendUint64(append(w.b, msgpcode.Int64), uint64(v))
	}
}

func (w *writer) float(v float64) {
	w.b = binary.BigEndian.AppendUint64(append(w.b, msgpcode.Double), math.Float64bits(v))
}

// header appends a length header using the fix form when n fits in
// fixMax, else the 8-, 16- or 32-bit form (c8 may be 0 when the type has no
// 8-bit form). Callers keep n below MaxFrameSize, so it always fits 32 bits.
func (w *writer) header(n int, fixBase byte, fixMax int, c8, c16, c32 byte) {
	switch {
	case n <= fixMax:
		w.b = append(w.b, fixBase|byte(n))
	case c8 != 0 && n <= math.MaxUint8:
		w.b = append(w.b, c8, byte(n))
	case n <= math.MaxUint16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, c16), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, c32), uint32(n))
	}
}

func (w *writer) str(s string) {
	w.header(len(s), msgpcode.FixedStrLow, int(msgpcode.FixedStrMask), msgpcode.Str8, msgpcode.Str16, msgpcode.Str32)
	w.b = append(w.b, s...)
}

func (w *writer) bin(p []byte) {
	// bin has no fix form: -1 disables it.
	w.header(len(p), 0, -1, msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32)
	w.b = append(w.b, p...)
}

func (w *writer) arrayLen(n int) {
	w.header(n, msgpcode.FixedArrayLow, int(msgpcode.FixedArrayMask), 0, msgpcode.Array16, msgpcode.Array32)
}

func (w *writer) mapLen(n int) {
	w.header(n, msgpcode.FixedMapLow, int(msgpcode.FixedMapMask), 0, msgpcode.Map16, msgpcode.Map32)
}

func (w *writer) ext(typ int8, payload []byte) {
	switch len(payload) {
	case 1:
		w.b = append(w.b, msgpcode.FixExt1)
	case 2:
		w.b = append(w.b, msgpcode.FixExt2)
	case 4:
		w.b = append(w.b, msgpcode.FixExt4)
	case 8:
		w.b = append(w.b, msgpcode.FixExt8)
	case 16:
		w.b = append(w.b, msgpcode.FixExt16)
	default:
		w.header(len(payload), 0, -1, msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32)
	}
	w.b = append(w.b, byte(typ))
	w.b = append(w.b, payload...)
}
