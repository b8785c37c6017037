package vfs

import (
	"errors"
	"strings"
	"testing"
)

func TestErrnoValues(t *testing.T) {
	tests := []struct {
		e    Errno
		want uint16
		name string
	}{
		{ESUCCESS, 0, "ESUCCESS"}, {E2BIG, 1, "E2BIG"}, {EACCES, 2, "EACCES"},
		{EADDRINUSE, 3, "EADDRINUSE"}, {EADDRNOTAVAIL, 4, "EADDRNOTAVAIL"},
		{EAFNOSUPPORT, 5, "EAFNOSUPPORT"}, {EAGAIN, 6, "EAGAIN"}, {EWOULDBLOCK, 6, "EAGAIN"},
		{EBADF, 8, "EBADF"}, {EBUSY, 10, "EBUSY"}, {ECHILD, 12, "ECHILD"},
		{ECONNREFUSED, 14, "ECONNREFUSED"}, {ECONNRESET, 15, "ECONNRESET"},
		{EEXIST, 20, "EEXIST"}, {EFAULT, 21, "EFAULT"}, {EFBIG, 22, "EFBIG"},
		{EINPROGRESS, 26, "EINPROGRESS"}, {EINTR, 27, "EINTR"}, {EINVAL, 28, "EINVAL"},
		{EIO, 29, "EIO"}, {EISCONN, 30, "EISCONN"}, {EISDIR, 31, "EISDIR"},
		{ELOOP, 32, "ELOOP"}, {EMFILE, 33, "EMFILE"}, {ENAMETOOLONG, 37, "ENAMETOOLONG"},
		{ENETUNREACH, 40, "ENETUNREACH"}, {ENOENT, 44, "ENOENT"}, {ENOMEM, 48, "ENOMEM"},
		{ENOPROTOOPT, 50, "ENOPROTOOPT"}, {ENOSPC, 51, "ENOSPC"}, {ENOSYS, 52, "ENOSYS"},
		{ENOTCONN, 53, "ENOTCONN"}, {ENOTDIR, 54, "ENOTDIR"}, {ENOTEMPTY, 55, "ENOTEMPTY"},
		{ENOTSOCK, 57, "ENOTSOCK"}, {ENOTSUP, 58, "ENOTSUP"}, {EOPNOTSUPP, 58, "ENOTSUP"},
		{ENOTTY, 59, "ENOTTY"}, {ENXIO, 60, "ENXIO"}, {EPERM, 63, "EPERM"}, {EPIPE, 64, "EPIPE"},
		{EPROTONOSUPPORT, 66, "EPROTONOSUPPORT"}, {ERANGE, 68, "ERANGE"}, {EROFS, 69, "EROFS"},
		{ESPIPE, 70, "ESPIPE"}, {ESRCH, 71, "ESRCH"}, {ETIMEDOUT, 73, "ETIMEDOUT"},
		{EXDEV, 75, "EXDEV"},
	}
	for _, tt := range tests {
		if uint16(tt.e) != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.e, tt.want)
		}
		if tt.e.Name() != tt.name {
			t.Errorf("Errno(%d).Name() = %q, want %q", tt.want, tt.e.Name(), tt.name)
		}
		if !strings.HasPrefix(tt.e.Error(), tt.name+": ") {
			t.Errorf("Errno(%d).Error() = %q", tt.want, tt.e.Error())
		}
	}
	if got := ENOENT.Error(); got != "ENOENT: no such file or directory" {
		t.Errorf("ENOENT.Error() = %q", got)
	}
	if got := Errno(999).Error(); got != "errno 999" {
		t.Errorf("Errno(999).Error() = %q", got)
	}
	for e := Errno(0); e <= ENOTCAPABLE; e++ {
		if strings.HasPrefix(e.Error(), "errno ") {
			t.Errorf("Errno %d has no text", e)
		}
	}
	var err error = ENOENT
	if !errors.Is(err, ENOENT) {
		t.Error("errors.Is(ENOENT, ENOENT) is false")
	}
}
