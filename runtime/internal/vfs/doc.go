// Package vfs is the in-memory POSIX-like file system that the sandboxed
// guest (CPython compiled to WebAssembly by Emscripten) sees. The guest's
// file syscalls (__syscall_openat, __syscall_stat64, fd_read,
// __syscall_getdents64, ...) are implemented elsewhere on top of this
// package; nothing here ever touches the host's file system.
//
// # Model
//
// An FS is a tree of nodes: regular files (content in a byte slice),
// directories, symbolic links and character devices (backed by a Device
// supplied by the host, such as NullDevice or the guest's stdio). Every node
// has a unique, increasing inode number, a Linux mode (S_IF* type bits plus
// permission bits), a link count and nanosecond timestamps taken from the
// clock given to New. There are no hard links, no FIFOs or sockets, and no
// owners: the guest runs as root (UID/GID 0), so permission bits are
// recorded and reported but only enforced where Linux enforces them for
// root (execute permission in Access). Reads do not update the access time
// (as with the noatime mount option).
//
// A node may be read-only (AddFile with readOnly, or SetReadOnly): its
// content is never copied or modified, and every attempt to change it
// fails with EROFS. This is how the host mounts large immutable content
// such as the standard library zip without copying it.
//
// # Paths
//
// All paths given to FS methods are absolute; a relative path is resolved
// from the root. Join combines a working directory with a relative path.
// Resolution follows POSIX: repeated slashes are ignored, "." and ".." are
// resolved physically (".." of a directory reached through a symlink is the
// real parent), symlinks are followed (at most MaxSymlinks per lookup, then
// ELOOP), a component longer than NameMax or a path of PathMax bytes or
// more gives ENAMETOOLONG, and a trailing slash requires a directory
// (ENOTDIR otherwise).
//
// # Errors
//
// Every operation reports failure as an Errno, the WASI/Emscripten error
// number the guest expects; ESUCCESS (0) means success. No operation
// panics on any input.
//
// # Open files
//
// Open returns a *File, an open file description: it carries the offset,
// the flags and the directory cursor, and is what dup'ed descriptors
// share. The descriptor table itself belongs to the caller. A File keeps its
// node alive after Unlink or a replacing Rename until Close.
//
// # Limits
//
// SetLimit bounds the total content of writable regular files (ENOSPC);
// SetNodeLimit bounds the number of nodes. File content grows
// geometrically but keeps at most a bounded amount of spare capacity, and
// no file may exceed MaxFileSize (EFBIG).
//
// # Snapshots
//
// Snapshot serialises the tree with encoding/gob and Restore rebuilds it.
// Device drivers, the clock and open Files are not serialised: the caller
// re-attaches devices with AddDevice, sets the clock with SetClock and
// re-opens files from File.State with Reopen.
//
// # Concurrency
//
// The guest uses the FS from one thread at a time, but every method takes
// the FS's mutex, so Go code may inspect the FS while the guest runs.
// Device drivers are called without the mutex held.
package vfs
