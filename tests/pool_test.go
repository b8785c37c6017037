package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// childWorkers lists the rlm-worker processes this test process started
// and has not reaped.
func childWorkers(t *testing.T) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || s[open+1:close] != "rlm-worker" {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		out[pid] = true
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPool(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	ctx := context.Background()
	p := supervisor.NewPool(workerMode.cfg(supervisor.Config{}), 2)
	defer p.Close()
	waitFor(t, "the pool fills", func() bool { return p.Idle() == 2 })
	// No more than the pool holds are started ahead: a negative, so it is
	// watched for a while (a worker starts in well under a second here).
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := len(childWorkers(t)); n > 2 {
			t.Fatalf("a pool of 2 runs %d workers", n)
		}
	}

	handed := map[int]bool{}
	for i := range 3 { // one more than the pool holds: Get starts it itself
		sb, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if err := sb.Initialize(ctx, "sandbox "+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(context)"); ce.Stdout != "sandbox "+strconv.Itoa(i)+"\n" {
			t.Fatalf("%+v", ce)
		}
		handed[sb.Info().PID] = true
	}
	if len(handed) != 3 {
		t.Fatalf("3 sandboxes, %d worker processes", len(handed))
	}

	// An idle worker that dies is not handed out.
	waitFor(t, "the pool refills", func() bool { return p.Idle() == 2 })
	var victim int
	for pid := range childWorkers(t) {
		if !handed[pid] {
			victim = pid
			break
		}
	}
	if victim == 0 {
		t.Fatal("no idle worker among the children")
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed worker is reaped", func() bool { return !alive(victim) })
	for range 2 {
		sb, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if sb.Info().PID == victim {
			t.Fatal("Get handed out the dead worker")
		}
		handed[sb.Info().PID] = true
		if err := sb.Initialize(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}

	// Close destroys what was not handed out, and no more is started.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for pid := range childWorkers(t) {
		if !handed[pid] {
			t.Errorf("worker %d survived Close", pid)
		}
	}
	if _, err := p.Get(ctx); !errors.Is(err, supervisor.ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// TestStartWithContextDone: New, in both modes, and Pool.Get, even with a
// sandbox ready, refuse a context that is already done (direct mode used
// to start a sandbox all the same, and Get to hand one out).
func TestStartWithContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	forEachMode(t, func(t *testing.T, m mode) {
		sb, err := supervisor.New(ctx, m.cfg(supervisor.Config{}))
		if err == nil {
			sb.Destroy()
		}
		if !errors.Is(err, supervisor.ErrCanceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("New: err = %v, want ErrCanceled wrapping context.Canceled", err)
		}
	})
	p := supervisor.NewPool(directMode.cfg(supervisor.Config{}), 1)
	defer p.Close()
	waitFor(t, "the pool fills", func() bool { return p.Idle() == 1 })
	sb, err := p.Get(ctx)
	if err == nil {
		sb.Destroy()
	}
	if !errors.Is(err, supervisor.ErrCanceled) || p.Idle() != 1 {
		t.Fatalf("Get: err = %v, idle %d: want ErrCanceled and the ready sandbox kept", err, p.Idle())
	}
}
