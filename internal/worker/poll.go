package worker

import (
	"io"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/spin"
)

// DefaultIdleSpin is how long a worker that has just served a request
// polls its input for the next one before it blocks.
//
// A processor that goes idle is slow to come back: the next request then
// runs on cold caches, at about half speed (Execute of `x = x + 1` took
// 95 µs in the worker when it blocked between requests, 65 µs when it
// polled). An agent sends its next request after an LLM call, so the
// polling is then lost, but it costs at most this much processor time
// per request; a caller that sends requests back to back gets them
// served at full speed.
const DefaultIdleSpin = 200 * time.Microsecond

// newPoller returns the poller of the worker's input, polling for d, or
// DefaultIdleSpin when d is zero; none when d is negative.
func newPoller(in io.Reader, d time.Duration) spin.Poller {
	if d == 0 {
		d = DefaultIdleSpin
	}
	return spin.New(in, d)
}
