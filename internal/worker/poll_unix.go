//go:build unix

package worker

import "golang.org/x/sys/unix"

const canPoll = true

// readable reports whether fd has data to read (or an error or hang-up to
// report), without waiting.
func readable(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return n != 0 || err != nil && err != unix.EINTR
}
