package vfs

// Open flags, with the Linux/musl values that Emscripten passes to
// __syscall_openat.
const (
	O_RDONLY    = 0          // Open for reading only.
	O_WRONLY    = 0o1        // Open for writing only.
	O_RDWR      = 0o2        // Open for reading and writing.
	O_ACCMODE   = 0o3        // Mask of the access-mode bits.
	O_CREAT     = 0o100      // Create the file if it does not exist.
	O_EXCL      = 0o200      // With O_CREAT: fail with EEXIST if the name exists.
	O_NOCTTY    = 0o400      // Accepted and ignored.
	O_TRUNC     = 0o1000     // Truncate a regular file opened for writing.
	O_APPEND    = 0o2000     // Every write appends to the end of the file.
	O_NONBLOCK  = 0o4000     // Non-blocking I/O (recorded; devices may honour it).
	O_DSYNC     = 0o10000    // Accepted and ignored.
	O_SYNC      = 0o4010000  // Accepted and ignored.
	O_DIRECTORY = 0o200000   // Fail with ENOTDIR unless the path names a directory.
	O_NOFOLLOW  = 0o400000   // Fail with ELOOP if the last component is a symlink.
	O_CLOEXEC   = 0o2000000  // Recorded only; close-on-exec is the caller's business.
	O_PATH      = 0o10000000 // Open a location only: no reading or writing.
)

// File type and permission bits of Stat.Mode, with Linux values.
const (
	S_IFMT   = 0o170000 // Mask of the file type bits.
	S_IFSOCK = 0o140000 // Socket.
	S_IFLNK  = 0o120000 // Symbolic link.
	S_IFREG  = 0o100000 // Regular file.
	S_IFBLK  = 0o060000 // Block device (never created by this package).
	S_IFDIR  = 0o040000 // Directory.
	S_IFCHR  = 0o020000 // Character device.
	S_IFIFO  = 0o010000 // FIFO (never created by this package).

	S_ISUID = 0o4000 // Set-user-ID bit.
	S_ISGID = 0o2000 // Set-group-ID bit.
	S_ISVTX = 0o1000 // Sticky bit.

	// PermMask selects the bits of a mode that Chmod may change.
	PermMask = 0o7777
)

// Directory entry types reported in DirEntry.Type (d_type of getdents64).
const (
	DT_UNKNOWN = 0  // Unknown type.
	DT_FIFO    = 1  // FIFO.
	DT_CHR     = 2  // Character device.
	DT_DIR     = 4  // Directory.
	DT_BLK     = 6  // Block device.
	DT_REG     = 8  // Regular file.
	DT_LNK     = 10 // Symbolic link.
	DT_SOCK    = 12 // Socket.
)

// Whence values for File.Lseek.
const (
	SEEK_SET = 0 // Seek relative to the start of the file.
	SEEK_CUR = 1 // Seek relative to the current offset.
	SEEK_END = 2 // Seek relative to the end of the file.
)

// Mode bits for FS.Access.
const (
	F_OK = 0 // The file exists.
	X_OK = 1 // Execute (search) permission.
	W_OK = 2 // Write permission.
	R_OK = 4 // Read permission.
)

// Special time values for FS.Utimens and File.Utimens, the counterparts of
// UTIME_NOW and UTIME_OMIT in a timespec. They lie outside the range of
// timestamps a guest can express, so they never collide with a real time.
const (
	UtimeNow  int64 = -1 << 63   // Set the timestamp to the current time.
	UtimeOmit int64 = -1<<63 + 1 // Leave the timestamp unchanged.
)

// Limits enforced by path resolution and file growth.
const (
	// PathMax is PATH_MAX: a path of PathMax bytes or more (the C limit
	// counts the terminating NUL) fails with ENAMETOOLONG. It also bounds
	// the length of a symlink target.
	PathMax = 4096
	// NameMax is NAME_MAX: a path component longer than this fails with
	// ENAMETOOLONG.
	NameMax = 255
	// MaxSymlinks is the number of symbolic links one resolution may follow
	// before failing with ELOOP (Linux's MAXSYMLINKS).
	MaxSymlinks = 40
	// MaxFileSize is the largest size a regular file may reach; growing a
	// file beyond it fails with EFBIG. Content lives in host memory, so this
	// is a backstop for when no quota is set.
	MaxFileSize int64 = 1 << 32
	// BlockSize is the value reported in Stat.Blksize.
	BlockSize = 4096
	// DevID is the value reported in Stat.Dev for every node.
	DevID = 1
)
