package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// TestPoolConfigError: a pool whose configuration can never start a
// sandbox (a MemoryLimit out of range) stops trying (it retried until
// Close, a warning a minute), and Get says why.
func TestPoolConfigError(t *testing.T) {
	p := NewPool(Config{MemoryLimit: 1}, 1)
	defer p.Close()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("the pool still tries to start sandboxes a minute later")
	}
	if _, err := p.Get(context.Background()); !errors.Is(err, runtime.ErrMemoryLimit) {
		t.Fatalf("Get: %v, want ErrMemoryLimit", err)
	}
}
