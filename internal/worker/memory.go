package worker

import (
	"errors"
	"fmt"
	"os"

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

// mapStage maps the first size bytes of the staging file f (see
// ipc.Stage.File) as the staged value, and returns its release; err says
// why the value cannot be used.
func mapStage(f *os.File, size int64) ([]byte, func(), error) {
	switch {
	case f == nil:
		return nil, nil, errors.New("the value is in a staging file, and the worker has none")
	case size < 0 || size > maxStage:
		return nil, nil, fmt.Errorf("a staged value of %d bytes (at most %d GiB)", size, maxStage>>30)
	case size == 0:
		return []byte{}, nil, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, nil, fmt.Errorf("staging file: %w", err)
	}
	if st.Size < size { // a mapping past the end faults when read
		return nil, nil, fmt.Errorf("the staging file holds %d bytes, not the %d announced", st.Size, size)
	}
	buf, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map the staging file: %w", err)
	}
	return buf, func() { _ = unix.Munmap(buf) }, nil
}
