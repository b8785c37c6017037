package worker

import (
	"math"
	"runtime/debug"
)

// The worker's Go heap: at start it is mostly wazero's view of the module,
// allocated once and kept; later it is mostly staged values (a context of
// hundreds of megabytes arrives in 1 MiB Stage frames). Each frame read is
// garbage once copied into the staging buffer, and with a percentage-only
// GC target that garbage grows with the buffer: a 1 GiB context used to
// take the worker past 7 GiB. So, while a value is staged, the heap gets a
// memory limit of the value's size plus stageSlack (the collector then
// reclaims frames as they go, spending at most half the CPU on it), and
// once the value is in the interpreter the buffer's memory goes back to
// the OS.

// stageSlack is what the heap may hold besides the value being staged.
const stageSlack = 96 << 20

// releaseMin is the staged size from which the memory is handed back to
// the OS once the value is in the interpreter.
const releaseMin = 16 << 20

// limitForStage bounds the heap while a value of size bytes is staged.
func limitForStage(size int64) {
	debug.SetMemoryLimit(size + stageSlack)
}

// stageDone lifts the limit and, after a large value, returns the freed
// memory to the OS (a full collection, a few milliseconds).
func stageDone(size int) {
	debug.SetMemoryLimit(math.MaxInt64)
	if size >= releaseMin {
		debug.FreeOSMemory()
	}
}
