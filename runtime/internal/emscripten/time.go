package emscripten

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The sandbox's local time zone is UTC: the host's zone is not revealed.

const (
	clockRealtime  = 0
	clockMonotonic = 1
)

func (h *Host) monotonic() time.Duration { return time.Since(h.start) }

func (h *Host) clockTimeGet(_ context.Context, mod api.Module, stack []uint64) {
	var ns int64
	switch u32(stack[0]) {
	case clockRealtime:
		ns = h.cfg.Now().UnixNano()
	case clockMonotonic:
		ns = int64(h.monotonic())
	case 2, 3: // the process's and the thread's CPU time: the guest's time less its waits in the host
		ns = int64(h.monotonic()) - h.idle.Load()
	default:
		stack[0] = wasiErr(EINVAL)
		return
	}
	if !memOf(mod).put64(u32(stack[2]), uint64(ns)) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	stack[0] = 0
}

func (h *Host) clockResGet(_ context.Context, mod api.Module, stack []uint64) {
	var res uint64
	switch u32(stack[0]) {
	case clockRealtime:
		res = 1000
	case clockMonotonic, 2, 3:
		res = 1000
	default:
		stack[0] = wasiErr(EINVAL)
		return
	}
	if !memOf(mod).put64(u32(stack[1]), res) {
		stack[0] = wasiErr(EFAULT)
		return
	}
	stack[0] = 0
}

func (h *Host) dateNow(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = f64(float64(h.cfg.Now().UnixNano()) / 1e6)
}

func (h *Host) getNow(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = f64(float64(h.monotonic().Nanoseconds()) / 1e6)
}

// _tzset_js(timezone, daylight, std_name, dst_name)
func (h *Host) tzset(_ context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	m.put32(u32(stack[0]), 0)
	m.put32(u32(stack[1]), 0)
	m.putCString(u32(stack[2]), "UTC", 17)
	m.putCString(u32(stack[3]), "UTC", 17)
}

// writeTM fills a struct tm (wasm32 layout: nine ints, then tm_gmtoff, tm_zone).
func writeTM(m mem, p uint32, t time.Time) {
	if !m.ok(p, 44) {
		return
	}
	m.put32(p, uint32(t.Second()))
	m.put32(p+4, uint32(t.Minute()))
	m.put32(p+8, uint32(t.Hour()))
	m.put32(p+12, uint32(t.Day()))
	m.put32(p+16, uint32(t.Month()-1))
	m.put32(p+20, uint32(int32(t.Year()-1900)))
	m.put32(p+24, uint32(t.Weekday()))
	m.put32(p+28, uint32(t.YearDay()-1))
	m.put32(p+32, 0)
	m.put32(p+36, 0)
}

func (h *Host) localtime(_ context.Context, mod api.Module, stack []uint64) {
	writeTM(memOf(mod), u32(stack[1]), time.Unix(int64(stack[0]), 0).UTC())
}

func (h *Host) gmtime(_ context.Context, mod api.Module, stack []uint64) {
	writeTM(memOf(mod), u32(stack[1]), time.Unix(int64(stack[0]), 0).UTC())
}

// readTM normalises a struct tm the way mktime/timegm do and writes it back.
func readTM(m mem, p uint32) (time.Time, bool) {
	if !m.ok(p, 44) {
		return time.Time{}, false
	}
	g := func(off uint32) int { return int(int32(m.u32(p + off))) }
	t := time.Date(g(20)+1900, time.Month(g(16)+1), g(12), g(8), g(4), g(0), 0, time.UTC)
	writeTM(m, p, t)
	return t, true
}

func (h *Host) mktime(_ context.Context, mod api.Module, stack []uint64) {
	t, ok := readTM(memOf(mod), u32(stack[0]))
	if !ok {
		stack[0] = ^uint64(0)
		return
	}
	stack[0] = uint64(t.Unix())
}

func (h *Host) timegm(ctx context.Context, mod api.Module, stack []uint64) {
	h.mktime(ctx, mod, stack)
}
