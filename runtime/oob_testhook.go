//go:build rlm_testhooks

package runtime

import "context"

// ProbeOutOfBounds is probeOutOfBounds for the black-box tests in tests/,
// which build a worker-like program with the rlm_testhooks tag. It is not
// in the binaries `make build` writes.
func ProbeOutOfBounds(ctx context.Context, fn string, addr uint32) error {
	return probeOutOfBounds(ctx, fn, addr)
}
