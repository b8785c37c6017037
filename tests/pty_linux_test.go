package tests

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (Linux).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n int
	rc, err := m.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil { // unlockpt
				n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN) // ptsname
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.Close()
		t.Skipf("cannot set up a pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("cannot open /dev/pts/%d: %v", n, err)
	}
	return m, s
}
