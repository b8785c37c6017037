package vfs

// Device is the driver behind a character device node (see FS.AddDevice).
// The FS calls it without holding its lock, so an implementation may block
// (a stdin waiting for input) and must do its own locking if it is shared.
// Offsets and seeking do not apply to devices: Lseek, Pread and Pwrite fail
// with ESPIPE before reaching the driver.
type Device interface {
	// Read reads up to len(p) bytes into p. Returning 0 with ESUCCESS
	// means end of file. A non-blocking device with nothing to read
	// returns EAGAIN.
	Read(p []byte) (int, Errno)
	// Write writes p, returning how many bytes were accepted.
	Write(p []byte) (int, Errno)
}

// NullDevice is /dev/null: reads return end of file, writes are discarded.
type NullDevice struct{}

// Read returns 0 (end of file).
func (NullDevice) Read(p []byte) (int, Errno) { return 0, ESUCCESS }

// Write discards p and reports it all written.
func (NullDevice) Write(p []byte) (int, Errno) { return len(p), ESUCCESS }

// ZeroDevice is /dev/zero: reads fill the buffer with zero bytes, writes
// are discarded.
type ZeroDevice struct{}

// Read fills p with zeros.
func (ZeroDevice) Read(p []byte) (int, Errno) {
	clear(p)
	return len(p), ESUCCESS
}

// Write discards p and reports it all written.
func (ZeroDevice) Write(p []byte) (int, Errno) { return len(p), ESUCCESS }
