//go:build linux

package ipc

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Page is a shared-memory page holding the interrupt word, an int32 at
// offset 0 that the supervisor and the worker access atomically through
// their own mappings of the same file, and the returned word, a uint64 at
// offset 8 (see MarkReturned). The supervisor creates it with
// NewPage and hands File to the worker (exec.Cmd.ExtraFiles); the worker
// maps it with OpenPage.
//
// All methods are safe for concurrent use and on a nil *Page. After
// Close, Load and Swap return 0 and Store does nothing.
type Page struct {
	mu sync.RWMutex // read-held while using word, write-held by Close
	// closing is set by Close before it takes mu: waiters then do not
	// sleep.
	closing atomic.Bool
	// sleepers counts the waiters about to sleep or asleep (for tests).
	sleepers atomic.Int32
	file     *os.File
	mem      []byte
	word     *int32 // &mem[0]; nil once closed
	// returned is &mem[8], nil when the file is too short or once closed.
	returned *uint64
}

// NewPage creates an interrupt page: an anonymous memory file
// (memfd_create, close-on-exec) or, where that is unavailable, an unlinked
// temporary file, one page long and mapped shared, with the word set to 0.
func NewPage() (*Page, error) {
	f, err := createPageFile()
	if err != nil {
		return nil, err
	}
	p, err := newPageFrom(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// newPageFrom sizes a fresh file to one page and maps it.
func newPageFrom(f *os.File) (*Page, error) {
	if err := f.Truncate(int64(os.Getpagesize())); err != nil {
		if errors.Is(err, unix.EFBIG) {
			return nil, fmt.Errorf("ipc: size interrupt page: %w: the file size limit (ulimit -f, RLIMIT_FSIZE) is under one page, %d bytes", err, os.Getpagesize())
		}
		return nil, fmt.Errorf("ipc: size interrupt page: %w", err)
	}
	return mapPage(f)
}

// createPageFile returns an anonymous file for a new page.
func createPageFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("rlm-interrupt", unix.MFD_CLOEXEC)
	if err == nil {
		return os.NewFile(uintptr(fd), "rlm-interrupt"), nil
	}
	f, terr := createTempPageFile()
	if terr != nil {
		return nil, fmt.Errorf("ipc: create interrupt page: memfd_create: %v; temporary file: %w", err, terr)
	}
	return f, nil
}

// createTempPageFile is the fallback for kernels without memfd_create: a
// temporary file, unlinked at once so nothing is left behind. Go opens it
// close-on-exec.
func createTempPageFile() (*os.File, error) {
	f, err := os.CreateTemp("", "rlm-interrupt-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenPage maps an interrupt page from a file descriptor inherited from
// the supervisor, typically os.NewFile(3, "interrupt") for the first
// exec.Cmd.ExtraFiles entry. The file must be open read-write and at least
// PageWordSize bytes long (else ErrPageTooSmall). On success the Page owns
// f and closes it in Close; on failure f is left open for the caller.
func OpenPage(f *os.File) (*Page, error) {
	if f == nil {
		return nil, errors.New("ipc: open interrupt page: nil file")
	}
	return mapPage(f)
}

// mapPage maps the first page (or the whole file, if shorter) of f.
func mapPage(f *os.File) (*Page, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ipc: map interrupt page: %w", err)
	}
	if st.Size() < PageWordSize {
		return nil, fmt.Errorf("ipc: map interrupt page: %w: %d bytes, need %d", ErrPageTooSmall, st.Size(), PageWordSize)
	}
	length := int(min(st.Size(), int64(os.Getpagesize())))
	mem, err := unix.Mmap(int(f.Fd()), 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("ipc: map interrupt page: %w", err)
	}
	p := &Page{
		file: f,
		mem:  mem,
		// mmap returns page-aligned memory, so the words are aligned.
		word: (*int32)(unsafe.Pointer(&mem[0])),
	}
	if len(mem) >= pageReturnedOffset+8 {
		p.returned = (*uint64)(unsafe.Pointer(&mem[pageReturnedOffset]))
	}
	return p, nil
}

// File returns the file backing the page, to pass to the worker through
// exec.Cmd.ExtraFiles. The Page keeps ownership: do not close it.
func (p *Page) File() *os.File {
	if p == nil {
		return nil
	}
	return p.file
}

// Store atomically sets the word, e.g. to SignalInterrupt, and wakes the
// goroutines of every process waiting in WaitInterrupt.
func (p *Page) Store(sig int32) {
	if p == nil {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.word != nil {
		atomic.StoreInt32(p.word, sig)
		if sig != 0 {
			p.wakeLocked()
		}
	}
}

// The futex operations, on a word shared between processes (no
// FUTEX_PRIVATE_FLAG): the kernel keys them by the file and offset, so a
// wake through one mapping reaches a wait through another.
const (
	futexWait = 0
	futexWake = 1
)

// waitSlice bounds one futex wait, so that a wait whose context ends just
// before it sleeps (a wake-up that cannot be told from the word) still
// returns soon.
var waitSlice = 100 * time.Millisecond // a variable for the tests

// wakeLocked wakes every waiter on the word; p.mu is read-held and the
// page is mapped.
func (p *Page) wakeLocked() {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(p.word)), futexWake, uintptr(^uint32(0)>>1), 0, 0, 0)
}

// wake wakes every waiter on the word, if the page is mapped.
func (p *Page) wake() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.word != nil {
		p.wakeLocked()
	}
}

// WaitInterrupt waits until the word is non-zero, ctx is done, or d has
// passed (d < 0: no limit), and reports whether the word is non-zero. A
// Store through any mapping of the page (the supervisor's) wakes it at
// once, without the waiter polling: the worker's interpreter waits here
// while its guest sleeps (runtime.InterruptWaiter). It may return early,
// after at most a tenth of a second. On a closed or nil Page it waits for
// ctx or d and reports false.
func (p *Page) WaitInterrupt(ctx context.Context, d time.Duration) bool {
	step := waitSlice
	if d >= 0 && d < step {
		step = d
	}
	if ctx.Err() != nil {
		return p.Load() != 0
	}
	if p != nil {
		stop := context.AfterFunc(ctx, p.wake)
		defer stop()
		p.mu.RLock()
		if w := p.word; w != nil {
			if atomic.LoadInt32(w) == 0 && ctx.Err() == nil && !p.closing.Load() {
				ts := unix.NsecToTimespec(int64(step))
				// Sleeps only while the word is 0 (EAGAIN otherwise);
				// EINTR and ETIMEDOUT end the wait like a wake-up does.
				p.sleepers.Add(1)
				_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
				p.sleepers.Add(-1)
				if errno != 0 && errno != unix.EAGAIN && errno != unix.EINTR && errno != unix.ETIMEDOUT {
					// A kernel or filter that refuses the wait: sleep
					// a tick instead, as the interpreter did before,
					// rather than return at once into a busy loop.
					time.Sleep(min(step, time.Millisecond))
				}
			}
			v := atomic.LoadInt32(w)
			p.mu.RUnlock()
			return v != 0
		}
		p.mu.RUnlock()
	}
	sleepFor(ctx, step)
	return false
}

// Swap atomically sets the word to v and returns its previous value. The
// worker calls Swap(0) to take a pending signal.
func (p *Page) Swap(v int32) int32 {
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.word == nil {
		return 0
	}
	old := atomic.SwapInt32(p.word, v)
	if v != 0 {
		p.wakeLocked()
	}
	return old
}

// Load atomically reads the word.
func (p *Page) Load() int32 {
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.word == nil {
		return 0
	}
	return atomic.LoadInt32(p.word)
}

// MarkReturned records that the code of the request id has returned. The
// worker calls it as its code returns, before it sends the output still
// buffered and the reply: the supervisor, whose reading of them a slow
// consumer of the output may hold up, can then tell code that has
// returned from code still running (Returned). It does nothing on a page
// too short to hold the word.
func (p *Page) MarkReturned(id uint64) {
	if p == nil {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.returned != nil {
		atomic.StoreUint64(p.returned, id)
	}
}

// Returned is the id of the request whose code returned last (see
// MarkReturned), or 0.
func (p *Page) Returned() uint64 {
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.returned == nil {
		return 0
	}
	return atomic.LoadUint64(p.returned)
}

// Close unmaps the page and closes its file. It is idempotent; calls after
// the first return nil.
func (p *Page) Close() error {
	if p == nil {
		return nil
	}
	// Waiters hold the read lock while they sleep: wake them until the
	// lock is free. One that looked at closing before it was set may fall
	// asleep after a wake-up; the next one reaches it.
	p.closing.Store(true)
	for {
		p.wake()
		if p.mu.TryLock() {
			break
		}
		goruntime.Gosched()
	}
	defer p.mu.Unlock()
	if p.word == nil {
		return nil
	}
	p.word, p.returned = nil, nil
	err := unix.Munmap(p.mem)
	p.mem = nil
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ipc: close interrupt page: %w", err)
	}
	return nil
}
