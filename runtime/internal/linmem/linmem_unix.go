//go:build unix

package linmem

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

const supported = true

// memory is a reserved region of which the first committed bytes are
// readable and writable.
type memory struct {
	buf       []byte // the whole reservation
	limit     int    // the memory's maximum size
	committed int
	exact     bool // commit exactly the size asked for (guarded)
}

func allocate(capacity, max uint64) experimental.LinearMemory {
	if max == 0 || max > 1<<32 {
		max = 1 << 32
	}
	size, exact := int(max), guarded.Load()
	if exact {
		size = GuardedReservation
	}
	buf, err := reserve(size)
	if err != nil {
		if exact {
			// Code without bounds checks must not run in memory without a
			// guard region; SetGuarded found the room for it, so this
			// does not happen short of a limit lowered since.
			return nil
		}
		// No room for the reservation (a virtual memory limit, `ulimit
		// -v`): memory on the Go heap, copied as it grows, as wazero's
		// own allocator does.
		return newHeapMemory(capacity, max)
	}
	// Where transparent huge pages are "madvise", ask for them: a large
	// context fills hundreds of megabytes of fresh memory, and faulting
	// it in 2 MiB pages instead of 4 KiB ones is several times cheaper.
	// (Pages mapped from a boot snapshot stay small.)
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	return &memory{buf: buf, limit: int(max), exact: exact}
}

// reserve maps n bytes of address space, inaccessible until committed (a
// variable for the tests).
var reserve = func(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
}

// probe reports whether n bytes of address space can be reserved.
func probe(n int) bool {
	buf, err := reserve(n)
	if err != nil {
		return false
	}
	_ = unix.Munmap(buf)
	return true
}

// Reservation is the size of the reserved address space: the patched
// wazero runs code without bounds checks only in a memory that reports
// at least GuardedReservation (experimental.GuardedLinearMemory).
func (m *memory) Reservation() uint64 { return uint64(len(m.buf)) }

// commitStep rounds commits up, so that many small grows do not each
// cost a system call.
const commitStep = 4 << 20

// Reallocate implements experimental.LinearMemory.
func (m *memory) Reallocate(size uint64) []byte {
	if size > uint64(m.limit) {
		return nil
	}
	if n := int(size); n > m.committed {
		step := commitStep
		if m.exact { // wasm sizes are whole 64 KiB pages, a multiple of the system's
			step = os.Getpagesize()
		}
		want := min((n+step-1)/step*step, m.limit)
		if err := unix.Mprotect(m.buf[m.committed:want], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = want
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory.
func (m *memory) Free() {
	if m.buf != nil {
		_ = unix.Munmap(m.buf)
		m.buf = nil
	}
}

func (m *memory) word(off uint32) *uint32 {
	if uint64(off)+4 > uint64(m.committed) {
		return nil
	}
	return (*uint32)(unsafe.Pointer(&m.buf[off]))
}

func (m *memory) mapFile(f *os.File, off int64, n int) error {
	if n == 0 {
		return nil
	}
	if n > m.committed {
		return fmt.Errorf("linmem: mapping %d bytes over a memory of %d", n, m.committed)
	}
	if ps := os.Getpagesize(); off%int64(ps) != 0 || n%ps != 0 {
		return fmt.Errorf("linmem: mapping at %d for %d bytes is not page-aligned", off, n)
	}
	addr := unsafe.Pointer(&m.buf[0])
	got, err := unix.MmapPtr(int(f.Fd()), off, addr, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		return fmt.Errorf("linmem: map %s: %w", f.Name(), err)
	}
	if got != addr {
		return fmt.Errorf("linmem: map %s: placed at %p, not %p", f.Name(), got, addr)
	}
	return nil
}
