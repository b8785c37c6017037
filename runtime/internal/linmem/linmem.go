// Package linmem backs WebAssembly linear memories with address space
// reserved up front, so that growing a memory never moves or copies it.
//
// wazero's default memory grows like a Go slice: past its capacity it is
// copied to a new, larger allocation. For an interpreter whose heap grows
// by hundreds of megabytes (a large context string), in a fresh worker
// process, those copies and the page faults of each new allocation cost
// more than the work itself. Here the memory's maximum is reserved once
// (inaccessible), and growing only makes more of it readable and writable.
package linmem

import "github.com/tetratelabs/wazero/experimental"

// Allocator returns the allocator to pass to
// experimental.WithMemoryAllocator, or nil where reservation is not
// supported (wazero's default allocator is then used).
func Allocator() experimental.MemoryAllocator {
	if !supported {
		return nil
	}
	return experimental.MemoryAllocatorFunc(allocate)
}
