// Package linmem backs WebAssembly linear memories with address space
// reserved up front, so that growing a memory never moves or copies it.
//
// wazero's default memory grows like a Go slice: past its capacity it is
// copied to a new, larger allocation. For an interpreter whose heap grows
// by hundreds of megabytes (a large context string), in a fresh worker
// process, those copies and the page faults of each new allocation cost
// more than the work itself. Here the memory's maximum is reserved once
// (inaccessible), and growing only makes more of it readable and writable.
package linmem

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// GuardedReservation is the address space a guarded memory reserves: every
// address a wasm32 load or store can form from the memory's base (an
// address up to 2^32-1, a static offset up to 2^32-1, 16 bytes of access),
// rounded up to 64 KiB. It equals experimental.GuardedReservation of the
// patched wazero (patches/wazero/0004), which refuses smaller reservations.
const GuardedReservation = 1<<33 + 1<<16

var guarded atomic.Bool

// SetGuarded makes the memories allocated from now on guarded: each reserves
// GuardedReservation bytes whatever its maximum, and only its current size
// is accessible (committed exactly, not in steps), so that any access
// outside it faults. Code compiled without bounds checks needs that. It
// reports false, changing nothing, where that much address space cannot be
// reserved.
func SetGuarded() bool {
	if !supported || !probe(GuardedReservation) {
		return false
	}
	guarded.Store(true)
	return true
}

// Allocator returns the allocator to pass to
// experimental.WithMemoryAllocator, or nil where reservation is not
// supported (wazero's default allocator is then used).
func Allocator() experimental.MemoryAllocator {
	if !supported {
		return nil
	}
	return experimental.MemoryAllocatorFunc(allocate)
}

// Tracker is an allocator that remembers the (first) memory it made, so that its
// contents can then be replaced by a file mapping (see MapFile). Use one
// Tracker per module instance.
type Tracker struct {
	mu   sync.Mutex
	last *memory
}

// Allocator returns the tracker's allocator, or nil where reservation is
// not supported.
func (t *Tracker) Allocator() experimental.MemoryAllocator {
	if !supported {
		return nil
	}
	return experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
		m := allocate(capacity, max)
		if mm, ok := m.(*memory); ok {
			t.mu.Lock()
			if t.last == nil {
				t.last = mm
			}
			t.mu.Unlock()
		}
		return m
	})
}

// ErrNoMapping is returned by MapFile where a memory cannot be backed by a
// file: the caller copies the contents instead.
var ErrNoMapping = errors.New("linmem: file mappings are not supported here")

// MapFile replaces the first n bytes of the tracked memory (which must be
// at least n bytes long already) by a private, copy-on-write mapping of f
// from offset off: pages are read from the page cache, shared with every
// other mapping of the file until written. off and n must be multiples of
// the system page size, and f must not change while mapped.
func (t *Tracker) MapFile(f *os.File, off int64, n int) error {
	t.mu.Lock()
	m := t.last
	t.mu.Unlock()
	if m == nil {
		return ErrNoMapping
	}
	return m.mapFile(f, off, n)
}

// Word returns a pointer to the 32-bit word at offset off of the tracked
// memory, for another goroutine to access atomically while the guest runs,
// or nil where the memory is not a reservation (which may move as it
// grows) or off+4 is past its committed bytes. The pointer stays valid
// for the memory's lifetime: a reservation never moves, and MapFile maps
// over it in place.
func (t *Tracker) Word(off uint32) *uint32 {
	t.mu.Lock()
	m := t.last
	t.mu.Unlock()
	if m == nil || off%4 != 0 {
		return nil
	}
	return m.word(off)
}

// heapMemory is a linear memory on the Go heap, for where the address
// space for a reservation is not to be had: it is copied to a larger
// buffer as it grows (at least doubling, up to its maximum), like wazero's
// default allocator does. It cannot be mapped from a file, and its words
// move, so Tracker does not track it.
type heapMemory struct {
	buf []byte
	max uint64
}

func newHeapMemory(capacity, max uint64) *heapMemory {
	return &heapMemory{buf: make([]byte, 0, min(capacity, max)), max: max}
}

// Reallocate implements experimental.LinearMemory.
func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
		copy(grown, m.buf)
		m.buf = grown
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *heapMemory) Free() { m.buf = nil }
