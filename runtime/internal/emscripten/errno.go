package emscripten

import "github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"

// Errno values the imports return, WASI-numbered as this Emscripten build
// expects (syscalls return them negated, wasi functions as is).
const (
	ESUCCESS        = vfs.ESUCCESS
	EACCES          = vfs.EACCES
	EAFNOSUPPORT    = vfs.EAFNOSUPPORT
	EADDRINUSE      = vfs.EADDRINUSE
	EADDRNOTAVAIL   = vfs.EADDRNOTAVAIL
	EAGAIN          = vfs.EAGAIN
	EBADF           = vfs.EBADF
	ECONNREFUSED    = vfs.ECONNREFUSED
	ECONNRESET      = vfs.ECONNRESET
	EEXIST          = vfs.EEXIST
	EFAULT          = vfs.EFAULT
	EINPROGRESS     = vfs.EINPROGRESS
	EINTR           = vfs.EINTR
	EINVAL          = vfs.EINVAL
	EISCONN         = vfs.EISCONN
	EISDIR          = vfs.EISDIR
	EMFILE          = vfs.EMFILE
	ENETUNREACH     = vfs.ENETUNREACH
	ENOENT          = vfs.ENOENT
	ENOPROTOOPT     = vfs.ENOPROTOOPT
	ENOSYS          = vfs.ENOSYS
	ENOTCONN        = vfs.ENOTCONN
	ENOTDIR         = vfs.ENOTDIR
	ENOTSOCK        = vfs.ENOTSOCK
	ENOTSUP         = vfs.ENOTSUP
	ENOTTY          = vfs.ENOTTY
	EPERM           = vfs.EPERM
	EPIPE           = vfs.EPIPE
	EPROTONOSUPPORT = vfs.EPROTONOSUPPORT
	ERANGE          = vfs.ERANGE
	ESPIPE          = vfs.ESPIPE
	ECHILD          = vfs.ECHILD
	ENODEV          = vfs.Errno(43)
	EOVERFLOW       = vfs.Errno(61)
)

// neg is a syscall's return value for an error.
func neg(e vfs.Errno) uint64 { return uint64(uint32(-int32(e))) }

// wasiErr is a wasi function's return value.
func wasiErr(e vfs.Errno) uint64 { return uint64(uint32(e)) }
