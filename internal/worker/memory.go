package worker

import (
	"golang.org/x/sys/unix"
)

// A staged value (a context of hundreds of megabytes arrives in 1 MiB
// Stage frames) is gathered in a buffer mapped apart from the Go heap:
// its size does not raise the collector's target, so the frames, garbage
// once copied, are collected as they go (they used to pile up to several
// times the value: a 1 GiB context took the worker past 7 GiB); its pages
// may be huge ones (fewer faults to fill it); and it is unmapped as soon
// as the value is in the interpreter, which keeps no reference to it.

// stageBuffer is the buffer of a value of size bytes (empty, with that
// capacity), and its release.
func stageBuffer(size int64) ([]byte, func()) {
	buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return make([]byte, 0, size), func() {}
	}
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	return buf[:0], func() { _ = unix.Munmap(buf) }
}
