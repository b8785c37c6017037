package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

func newInterp(t *testing.T, cfg runtime.Config) *runtime.Interpreter {
	t.Helper()
	in, err := runtime.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

func Example() {
	ctx := context.Background()
	in, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()

	var out strings.Builder
	res, _ := in.Exec(ctx, "x = [n * n for n in range(5)]\nprint(sum(x))", runtime.Output{Stdout: &out})
	fmt.Print(out.String())
	fmt.Println(res.Error == nil)

	x, found, _ := in.Get(ctx, "x")
	fmt.Println(x, found)
	// Output:
	// 30
	// true
	// [0 1 4 9 16] true
}

// startedWriter signals the first write.
type startedWriter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

func TestInterruptSource(t *testing.T) {
	intr := &runtime.AtomicInterrupt{}
	in := newInterp(t, runtime.Config{Interrupt: intr})
	w := &startedWriter{ch: make(chan struct{})}
	done := make(chan *runtime.Result, 1)
	go func() {
		res, err := in.Exec(context.Background(), "print('go', flush=True)\nwhile True: pass", runtime.Output{Stdout: w})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-w.ch
	intr.Store(runtime.SIGINT)
	res := <-done
	if res == nil || res.Error == nil || res.Error.Type != "KeyboardInterrupt" {
		t.Fatalf("got %+v", res)
	}
	if intr.Load() != 0 {
		t.Fatalf("signal not taken: %d", intr.Load())
	}
	res, err := in.Exec(context.Background(), "pass", runtime.Output{})
	if err != nil || res.Error != nil {
		t.Fatalf("after interrupt: %+v %v", res, err)
	}
}

func TestCloseKillsStubbornCode(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	w := &startedWriter{ch: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := in.Exec(context.Background(), "print('go', flush=True)\nwhile True:\n  try:\n    while True: pass\n  except KeyboardInterrupt: pass", runtime.Output{Stdout: w})
		done <- err
	}()
	<-w.ch
	in.Interrupt()
	in.Close()
	if err := <-done; !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	if _, err := in.Exec(context.Background(), "pass", runtime.Output{}); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestGuestExitIsAnError(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	_, err := in.Exec(context.Background(), "import os\nos._exit(3)", runtime.Output{})
	if !errors.Is(err, runtime.ErrDead) || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("err = %v", err)
	}
	if _, err := in.Exec(context.Background(), "pass", runtime.Output{}); !errors.Is(err, runtime.ErrDead) {
		t.Fatalf("after exit: %v", err)
	}
}

func TestMissingDistribution(t *testing.T) {
	_, err := runtime.New(context.Background(), runtime.Config{Distribution: runtime.Dir(t.TempDir())})
	if !errors.Is(err, runtime.ErrDistribution) || !strings.Contains(err.Error(), "make") {
		t.Fatalf("err = %v", err)
	}
}

func TestDiskLimit(t *testing.T) {
	in := newInterp(t, runtime.Config{DiskLimit: 1 << 20})
	res, err := in.Exec(context.Background(), "open('/tmp/big', 'wb').write(b'x' * (2 << 20))", runtime.Output{})
	if err != nil || res.Error == nil || !strings.Contains(res.Error.Message, "No space") {
		t.Fatalf("got %+v %v", res, err)
	}
}
