package ipc

import (
	"context"
	"time"
)

// SignalInterrupt is the value the supervisor stores in the interrupt page
// to interrupt running Python: SIGINT's number, which Pyodide's interrupt
// buffer turns into KeyboardInterrupt.
const SignalInterrupt int32 = 2

// PageWordSize is the minimum size of a file that OpenPage accepts: the
// interrupt word is an int32 at offset 0, in native byte order (both ends
// run on the same machine).
const PageWordSize = 4

// pageReturnedOffset is where the page holds the returned word (see
// Page.MarkReturned): a uint64, 8-byte aligned, in native byte order. A
// page shorter than pageReturnedOffset+8 has none.
const pageReturnedOffset = 8

// sleepFor returns when ctx is done or d has passed (d < 0: ctx alone): the
// wait of a Page that cannot be woken.
func sleepFor(ctx context.Context, d time.Duration) {
	if d < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
