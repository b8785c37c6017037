package runtime

import (
	"context"
	"strings"
	"testing"
)

// TestOutOfBoundsTraps: with bounds checks (every build of this test: it
// never calls DropBoundsChecks), a guest access outside its memory, up to
// the farthest a wasm32 access reaches, is a trap error, and accesses
// inside it work. tests/bounds_test.go covers the worker's unchecked code.
func TestOutOfBoundsTraps(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fn   string
		addr uint32
		ok   bool
	}{
		{"load", 0, true},
		{"load", 1<<16 - 4, true},
		{"load", 1<<16 - 3, false},
		{"load", 1 << 16, false},
		{"load", 1 << 31, false},
		{"load", 1<<32 - 1, false},
		{"far", 0, false},
		{"far", 1<<32 - 1, false},
	} {
		err := probeOutOfBounds(ctx, tc.fn, tc.addr)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s(%#x): %v", tc.fn, tc.addr, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "out of bounds memory access")):
			t.Errorf("%s(%#x): err = %v, want an out of bounds trap", tc.fn, tc.addr, err)
		}
	}
}
