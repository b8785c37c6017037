//go:build unix

package spin

import "golang.org/x/sys/unix"

const canPoll = true

// readable reports whether fd has data to read (or an error or hang-up to
// report), without waiting.
func readable(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return n != 0 || err != nil && err != unix.EINTR
}

// yield lets another thread that is ready to run have the processor: when
// the machine has more of them than processors, the peer a poller waits
// for may be one.
func yield() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
