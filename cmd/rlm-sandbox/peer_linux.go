package main

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// watchReaderGone calls gone when the reader of w, a pipe or a socket, has
// closed its end (poll reports POLLERR or POLLHUP on the writer's end
// then, even when no event was asked for). It does nothing for other
// writers: a file or terminal has no reader to lose.
func watchReaderGone(w io.Writer, gone func()) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
		return
	}
	fd := int(f.Fd())
	go func() {
		for {
			fds := []unix.PollFd{{Fd: int32(fd)}}
			_, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				gone()
				return
			}
		}
	}()
}
