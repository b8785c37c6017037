//go:build unix

package linmem

import (
	"errors"
	"runtime/debug"
	"testing"
)

func TestGrowKeepsAddressAndContents(t *testing.T) {
	a := Allocator()
	if a == nil {
		t.Skip("no reservation on this platform")
	}
	m := a.Allocate(0, 1<<30)
	defer m.Free()
	b := m.Reallocate(64 << 10)
	if len(b) != 64<<10 {
		t.Fatalf("len %d", len(b))
	}
	b[0], b[len(b)-1] = 1, 2
	c := m.Reallocate(100 << 20)
	if &c[0] != &b[0] || c[0] != 1 || c[64<<10-1] != 2 || len(c) != 100<<20 {
		t.Fatal("growing moved or lost the memory")
	}
	c[len(c)-1] = 3 // committed: must not fault
	if m.Reallocate(2<<30) != nil {
		t.Fatal("grew past the maximum")
	}
}

// TestGuarded: a guarded memory reserves GuardedReservation bytes whatever
// its maximum, keeps the maximum, and faults on any byte past its size
// (Go code faults as wasm code would; SetPanicOnFault makes it a panic).
func TestGuarded(t *testing.T) {
	if !SetGuarded() {
		t.Skip("no guarded reservation on this platform")
	}
	defer guarded.Store(false)
	m := Allocator().Allocate(0, 2<<20).(*memory)
	defer m.Free()
	if m.Reservation() < GuardedReservation {
		t.Fatalf("reservation %d", m.Reservation())
	}
	b := m.Reallocate(64 << 10)
	b[len(b)-1] = 1
	if m.Reallocate(2<<20+64<<10) != nil {
		t.Fatal("grew past the maximum")
	}
	for _, off := range []int{64 << 10, 2<<20 - 1, 4 << 30, GuardedReservation - 1} {
		if !faults(m.buf, off) {
			t.Errorf("byte %#x past a 64 KiB memory did not fault", off)
		}
	}
	m.Reallocate(128 << 10)
	if faults(m.buf, 128<<10-1) || !faults(m.buf, 128<<10) {
		t.Error("grown memory: wrong accessible end")
	}
}

func faults(buf []byte, off int) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	sink = buf[off]
	return false
}

var sink byte

// Where the address space for a reservation cannot be had (a virtual
// memory limit), an unguarded memory lives on the Go heap: it grows,
// keeping its contents, up to its maximum, and Tracker does not track it.
// A guarded one is refused (nil) rather than run without its guard.
func TestNoRoomForTheReservation(t *testing.T) {
	old := reserve
	reserve = func(int) ([]byte, error) { return nil, errors.New("cannot allocate memory") }
	defer func() { reserve = old }()
	prev := guarded.Load()
	guarded.Store(false)
	defer guarded.Store(prev)

	var tr Tracker
	m := tr.Allocator().Allocate(1<<16, 1<<20)
	if m == nil {
		t.Fatal("no memory")
	}
	b := m.Reallocate(1 << 16)
	if len(b) != 1<<16 {
		t.Fatalf("Reallocate(64 KiB): %d bytes", len(b))
	}
	b[0], b[len(b)-1] = 7, 9
	b = m.Reallocate(3 << 16)
	if len(b) != 3<<16 || b[0] != 7 || b[1<<16-1] != 9 || b[1<<16] != 0 {
		t.Fatalf("grown memory: %d bytes, contents lost or not zero", len(b))
	}
	if m.Reallocate(1<<20+1) != nil {
		t.Error("grew past its maximum")
	}
	if tr.Word(0) != nil {
		t.Error("a heap memory's word handed out: it moves as it grows")
	}
	m.Free()

	guarded.Store(true)
	if m := allocate(1<<16, 1<<20); m != nil {
		t.Error("a guarded memory without its reservation")
	}
}
