package vfs

import "strconv"

// Errno is an Emscripten/WASI error number. The values follow the WASI
// numbering used by this Emscripten build (not the Linux numbering), so a
// syscall implementation can hand them to the guest unchanged (negated where
// the ABI wants that).
//
// The zero value ESUCCESS means "no error". Errno implements error so that Go
// callers can wrap it, but note that ESUCCESS is a non-nil error value: test
// for it with e != ESUCCESS (or e != 0), not with err != nil.
type Errno uint16

// Error numbers. The names and values match WASI's errno enumeration.
const (
	ESUCCESS        Errno = 0  // No error.
	E2BIG           Errno = 1  // Argument list too long.
	EACCES          Errno = 2  // Permission denied.
	EADDRINUSE      Errno = 3  // Address in use.
	EADDRNOTAVAIL   Errno = 4  // Address not available.
	EAFNOSUPPORT    Errno = 5  // Address family not supported.
	EAGAIN          Errno = 6  // Resource temporarily unavailable.
	EALREADY        Errno = 7  // Operation already in progress.
	EBADF           Errno = 8  // Bad file descriptor.
	EBADMSG         Errno = 9  // Bad message.
	EBUSY           Errno = 10 // Device or resource busy.
	ECANCELED       Errno = 11 // Operation canceled.
	ECHILD          Errno = 12 // No child process.
	ECONNABORTED    Errno = 13 // Connection aborted.
	ECONNREFUSED    Errno = 14 // Connection refused.
	ECONNRESET      Errno = 15 // Connection reset by peer.
	EDEADLK         Errno = 16 // Resource deadlock would occur.
	EDESTADDRREQ    Errno = 17 // Destination address required.
	EDOM            Errno = 18 // Domain error.
	EDQUOT          Errno = 19 // Quota exceeded.
	EEXIST          Errno = 20 // File exists.
	EFAULT          Errno = 21 // Bad address.
	EFBIG           Errno = 22 // File too large.
	EHOSTUNREACH    Errno = 23 // Host is unreachable.
	EIDRM           Errno = 24 // Identifier removed.
	EILSEQ          Errno = 25 // Illegal byte sequence.
	EINPROGRESS     Errno = 26 // Operation in progress.
	EINTR           Errno = 27 // Interrupted system call.
	EINVAL          Errno = 28 // Invalid argument.
	EIO             Errno = 29 // I/O error.
	EISCONN         Errno = 30 // Socket is connected.
	EISDIR          Errno = 31 // Is a directory.
	ELOOP           Errno = 32 // Symbolic link loop.
	EMFILE          Errno = 33 // No file descriptors available.
	EMLINK          Errno = 34 // Too many links.
	EMSGSIZE        Errno = 35 // Message too large.
	EMULTIHOP       Errno = 36 // Multihop attempted.
	ENAMETOOLONG    Errno = 37 // Filename too long.
	ENETDOWN        Errno = 38 // Network is down.
	ENETRESET       Errno = 39 // Connection reset by network.
	ENETUNREACH     Errno = 40 // Network unreachable.
	ENFILE          Errno = 41 // Too many open files in system.
	ENOBUFS         Errno = 42 // No buffer space available.
	ENODEV          Errno = 43 // No such device.
	ENOENT          Errno = 44 // No such file or directory.
	ENOEXEC         Errno = 45 // Exec format error.
	ENOLCK          Errno = 46 // No locks available.
	ENOLINK         Errno = 47 // Link has been severed.
	ENOMEM          Errno = 48 // Out of memory.
	ENOMSG          Errno = 49 // No message of desired type.
	ENOPROTOOPT     Errno = 50 // Protocol not available.
	ENOSPC          Errno = 51 // No space left on device.
	ENOSYS          Errno = 52 // Function not implemented.
	ENOTCONN        Errno = 53 // Socket not connected.
	ENOTDIR         Errno = 54 // Not a directory.
	ENOTEMPTY       Errno = 55 // Directory not empty.
	ENOTRECOVERABLE Errno = 56 // State not recoverable.
	ENOTSOCK        Errno = 57 // Not a socket.
	ENOTSUP         Errno = 58 // Not supported.
	ENOTTY          Errno = 59 // Not a tty.
	ENXIO           Errno = 60 // No such device or address.
	EOVERFLOW       Errno = 61 // Value too large for data type.
	EOWNERDEAD      Errno = 62 // Previous owner died.
	EPERM           Errno = 63 // Operation not permitted.
	EPIPE           Errno = 64 // Broken pipe.
	EPROTO          Errno = 65 // Protocol error.
	EPROTONOSUPPORT Errno = 66 // Protocol not supported.
	EPROTOTYPE      Errno = 67 // Protocol wrong type for socket.
	ERANGE          Errno = 68 // Result not representable.
	EROFS           Errno = 69 // Read-only file system.
	ESPIPE          Errno = 70 // Invalid seek.
	ESRCH           Errno = 71 // No such process.
	ESTALE          Errno = 72 // Stale file handle.
	ETIMEDOUT       Errno = 73 // Operation timed out.
	ETXTBSY         Errno = 74 // Text file busy.
	EXDEV           Errno = 75 // Cross-device link.
	ENOTCAPABLE     Errno = 76 // Capabilities insufficient.

	EOPNOTSUPP  Errno = ENOTSUP // Operation not supported (alias of ENOTSUP).
	EWOULDBLOCK Errno = EAGAIN  // Operation would block (alias of EAGAIN).
)

var errnoText = [...]string{
	ESUCCESS:        "ESUCCESS: success",
	E2BIG:           "E2BIG: argument list too long",
	EACCES:          "EACCES: permission denied",
	EADDRINUSE:      "EADDRINUSE: address in use",
	EADDRNOTAVAIL:   "EADDRNOTAVAIL: address not available",
	EAFNOSUPPORT:    "EAFNOSUPPORT: address family not supported by protocol",
	EAGAIN:          "EAGAIN: resource temporarily unavailable",
	EALREADY:        "EALREADY: operation already in progress",
	EBADF:           "EBADF: bad file descriptor",
	EBADMSG:         "EBADMSG: bad message",
	EBUSY:           "EBUSY: resource busy",
	ECANCELED:       "ECANCELED: operation canceled",
	ECHILD:          "ECHILD: no child process",
	ECONNABORTED:    "ECONNABORTED: connection aborted",
	ECONNREFUSED:    "ECONNREFUSED: connection refused",
	ECONNRESET:      "ECONNRESET: connection reset by peer",
	EDEADLK:         "EDEADLK: resource deadlock would occur",
	EDESTADDRREQ:    "EDESTADDRREQ: destination address required",
	EDOM:            "EDOM: domain error",
	EDQUOT:          "EDQUOT: quota exceeded",
	EEXIST:          "EEXIST: file exists",
	EFAULT:          "EFAULT: bad address",
	EFBIG:           "EFBIG: file too large",
	EHOSTUNREACH:    "EHOSTUNREACH: host is unreachable",
	EIDRM:           "EIDRM: identifier removed",
	EILSEQ:          "EILSEQ: illegal byte sequence",
	EINPROGRESS:     "EINPROGRESS: operation in progress",
	EINTR:           "EINTR: interrupted system call",
	EINVAL:          "EINVAL: invalid argument",
	EIO:             "EIO: I/O error",
	EISCONN:         "EISCONN: socket is connected",
	EISDIR:          "EISDIR: is a directory",
	ELOOP:           "ELOOP: too many levels of symbolic links",
	EMFILE:          "EMFILE: no file descriptors available",
	EMLINK:          "EMLINK: too many links",
	EMSGSIZE:        "EMSGSIZE: message too large",
	EMULTIHOP:       "EMULTIHOP: multihop attempted",
	ENAMETOOLONG:    "ENAMETOOLONG: filename too long",
	ENETDOWN:        "ENETDOWN: network is down",
	ENETRESET:       "ENETRESET: connection reset by network",
	ENETUNREACH:     "ENETUNREACH: network unreachable",
	ENFILE:          "ENFILE: too many open files in system",
	ENOBUFS:         "ENOBUFS: no buffer space available",
	ENODEV:          "ENODEV: no such device",
	ENOENT:          "ENOENT: no such file or directory",
	ENOEXEC:         "ENOEXEC: exec format error",
	ENOLCK:          "ENOLCK: no locks available",
	ENOLINK:         "ENOLINK: link has been severed",
	ENOMEM:          "ENOMEM: out of memory",
	ENOMSG:          "ENOMSG: no message of desired type",
	ENOPROTOOPT:     "ENOPROTOOPT: protocol not available",
	ENOSPC:          "ENOSPC: no space left on device",
	ENOSYS:          "ENOSYS: function not implemented",
	ENOTCONN:        "ENOTCONN: socket not connected",
	ENOTDIR:         "ENOTDIR: not a directory",
	ENOTEMPTY:       "ENOTEMPTY: directory not empty",
	ENOTRECOVERABLE: "ENOTRECOVERABLE: state not recoverable",
	ENOTSOCK:        "ENOTSOCK: not a socket",
	ENOTSUP:         "ENOTSUP: not supported",
	ENOTTY:          "ENOTTY: not a tty",
	ENXIO:           "ENXIO: no such device or address",
	EOVERFLOW:       "EOVERFLOW: value too large for data type",
	EOWNERDEAD:      "EOWNERDEAD: previous owner died",
	EPERM:           "EPERM: operation not permitted",
	EPIPE:           "EPIPE: broken pipe",
	EPROTO:          "EPROTO: protocol error",
	EPROTONOSUPPORT: "EPROTONOSUPPORT: protocol not supported",
	EPROTOTYPE:      "EPROTOTYPE: protocol wrong type for socket",
	ERANGE:          "ERANGE: result not representable",
	EROFS:           "EROFS: read-only file system",
	ESPIPE:          "ESPIPE: invalid seek",
	ESRCH:           "ESRCH: no such process",
	ESTALE:          "ESTALE: stale file handle",
	ETIMEDOUT:       "ETIMEDOUT: operation timed out",
	ETXTBSY:         "ETXTBSY: text file busy",
	EXDEV:           "EXDEV: cross-device link",
	ENOTCAPABLE:     "ENOTCAPABLE: capabilities insufficient",
}

// Error returns the symbolic name and a short description, for example
// "ENOENT: no such file or directory". Unknown values print as "errno N".
func (e Errno) Error() string {
	if int(e) < len(errnoText) && errnoText[e] != "" {
		return errnoText[e]
	}
	return "errno " + strconv.Itoa(int(e))
}

// Name returns just the symbolic name, for example "ENOENT". Unknown values
// print as "errno N".
func (e Errno) Name() string {
	s := e.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i]
		}
	}
	return s
}
