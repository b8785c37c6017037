//go:build unix

// Package refused gives tests a loopback address that refuses connections
// for as long as the test runs.
package refused

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// Addr returns "127.0.0.1:PORT" where nothing listens. A socket bound to
// the port and never listening holds it until the test ends: connecting is
// refused, and no server started meanwhile (by this test or another test
// process) can be given the port, as it can be one closed after use.
func Addr(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}
