//go:build linux

package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// The soak suite: `make soak` runs it at full size (RLM_SOAK=1, at most
// 10 minutes); `make test` runs a short version of each case.
func soakSize(short, full int) int {
	if os.Getenv("RLM_SOAK") == "1" {
		return full
	}
	return short
}

// TestSoakConcurrent runs many worker sandboxes at once, each a series of
// mixed executes (prints, exceptions, llm_query, a timeout every 50th):
// every result must be the expected one.
func TestSoakConcurrent(t *testing.T) {
	sandboxes, executes := soakSize(4, 16), soakSize(60, 1000)
	ctx := context.Background()
	var failures atomic.Int64
	var timeouts atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range sandboxes {
		wg.Go(func() {
			sb, err := supervisor.New(ctx, workerMode.cfg(supervisor.Config{Timeout: 2 * time.Second, OnLLMQuery: upper}))
			if err != nil {
				t.Errorf("sandbox %d: %v", i, err)
				failures.Add(1)
				return
			}
			defer sb.Destroy()
			if err := sb.Initialize(ctx, map[string]any{"n": i}); err != nil {
				t.Errorf("sandbox %d: %v", i, err)
				failures.Add(1)
				return
			}
			fail := func(j int, format string, args ...any) {
				if failures.Add(1) <= 20 {
					t.Errorf("sandbox %d, execute %d: %s", i, j, fmt.Sprintf(format, args...))
				}
			}
			for j := range executes {
				switch {
				case j%50 == 49:
					_, err := sb.Execute(ctx, "while True: pass")
					if !errors.Is(err, supervisor.ErrTimeout) {
						fail(j, "endless loop: %v, want ErrTimeout", err)
					}
					timeouts.Add(1)
				case j%4 == 0:
					res, err := sb.Execute(ctx, fmt.Sprintf("print(context['n'], %d)", j))
					if want := fmt.Sprintf("%d %d\n", i, j); err != nil || res.Stdout != want || res.Error != "" {
						fail(j, "print: %+v, %v", res, err)
					}
				case j%4 == 1:
					res, err := sb.Execute(ctx, fmt.Sprintf("raise ValueError(%d)", j))
					if err != nil || res.ErrorType != "ValueError" || res.Error != fmt.Sprintf("ValueError: %d", j) {
						fail(j, "raise: %+v, %v", res, err)
					}
				case j%4 == 2:
					res, err := sb.Execute(ctx, fmt.Sprintf("print(llm_query('q%d'))", j))
					if want := fmt.Sprintf("Q%d\n", j); err != nil || res.Stdout != want || res.BridgeCalls != 1 {
						fail(j, "llm_query: %+v, %v", res, err)
					}
				default:
					res, err := sb.Execute(ctx, fmt.Sprintf("x%d = sum(range(%d))\nprint(x%d)", j%7, j, j%7))
					if want := fmt.Sprintf("%d\n", j*(j-1)/2); err != nil || res.Stdout != want {
						fail(j, "sum: %+v, %v", res, err)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sandboxes × %d executes in %v: %d failures, %d expected timeouts",
		sandboxes, executes, time.Since(start).Round(time.Millisecond), failures.Load(), timeouts.Load())
}

// resources counts what a supervisor could leak.
type resources struct {
	children, fds, goroutines int
	rss                       uint64
}

func measure(t *testing.T) resources {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	var size, res uint64
	fmt.Sscan(string(b), &size, &res)
	return resources{children: len(childPIDs(t, os.Getpid())), fds: len(fds) - 1, // ReadDir's own
		goroutines: runtime.NumGoroutine(), rss: res * uint64(os.Getpagesize())}
}

// settle measures until the goroutines of ended sandboxes are gone (they
// end right after their process is reaped), at most a few seconds.
func settle(t *testing.T, want resources) resources {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := measure(t)
		if got.goroutines <= want.goroutines && got.children <= want.children && got.fds <= want.fds || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond) // nothing to wait on: the counts come from /proc and the runtime
	}
}

// TestSoakCycles creates, uses and destroys sandboxes over and over: no
// process, descriptor or goroutine may be left, and the supervisor's RSS
// stays flat.
func TestSoakCycles(t *testing.T) {
	cycles := soakSize(40, 1000)
	const parallel = 4
	ctx := context.Background()
	cycle := func(i int) error {
		sb, err := supervisor.New(ctx, workerMode.cfg(supervisor.Config{Timeout: 10 * time.Second}))
		if err != nil {
			return err
		}
		defer sb.Destroy()
		if err := sb.Initialize(ctx, strings.Repeat("x", 1000)); err != nil {
			return err
		}
		res, err := sb.Execute(ctx, fmt.Sprintf("print(len(context) + %d)", i))
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("%d\n", 1000+i); res.Stdout != want {
			return fmt.Errorf("got %q, want %q", res.Stdout, want)
		}
		return sb.Destroy()
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		next.Store(int64(from))
		for range parallel {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < to; i = int(next.Add(1)) - 1 {
					if err := cycle(i); err != nil {
						t.Errorf("cycle %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	// A warm-up, so that what the first sandboxes allocate for good
	// (caches, the logger, pools) is in the baseline.
	warm := max(cycles/10, 8)
	run(0, warm)
	before := settle(t, resources{})
	start := time.Now()
	run(warm, cycles)
	after := settle(t, before)
	t.Logf("%d cycles in %v; before %+v, after %+v", cycles-warm, time.Since(start).Round(time.Millisecond), before, after)
	if after.children > before.children {
		t.Errorf("%d worker processes left (was %d)", after.children, before.children)
	}
	if after.fds > before.fds {
		t.Errorf("%d descriptors open (was %d)", after.fds, before.fds)
	}
	if after.goroutines > before.goroutines {
		t.Errorf("%d goroutines (was %d)", after.goroutines, before.goroutines)
	}
	if grew := int64(after.rss) - int64(before.rss); grew > 5<<20 {
		t.Errorf("RSS grew by %.1f MB (%d → %d bytes), want at most 5 MB", float64(grew)/(1<<20), before.rss, after.rss)
	}
}

// TestSoakChaos kills random workers in the middle of executes and bridge
// calls: each affected call returns ErrWorkerExited within 100 ms, the
// other sandboxes are unaffected, and Restart brings a sandbox back.
func TestSoakChaos(t *testing.T) {
	sandboxes, rounds := soakSize(4, 8), soakSize(3, 25)
	ctx := context.Background()
	type box struct {
		sb      supervisor.Sandbox
		lines   *lineWaiter
		inQuery chan struct{}
		answer  chan string
	}
	boxes := make([]*box, sandboxes)
	for i := range boxes {
		b := &box{lines: newLineWaiter(), inQuery: make(chan struct{}, 1), answer: make(chan string, 1)}
		b.sb = newSandbox(t, workerMode, supervisor.Config{
			Timeout: -1, OnStdout: b.lines.onLine,
			OnLLMQuery: func(ctx context.Context, p string) (string, error) {
				b.inQuery <- struct{}{}
				select {
				case a := <-b.answer:
					return a, nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			},
		}, "")
		boxes[i] = b
	}
	var worst time.Duration
	for round := range rounds {
		type outcome struct {
			res      *supervisor.CodeExecution
			err      error
			returned time.Time
		}
		done := make([]chan outcome, len(boxes))
		for i, b := range boxes {
			done[i] = make(chan outcome, 1)
			code := fmt.Sprintf("print('running %d')\nwhile True: pass", round)
			if i%2 == 1 {
				code = fmt.Sprintf("print('running %d')\nprint(llm_query('wait'))", round)
			}
			go func() {
				res, err := b.sb.Execute(ctx, code)
				done[i] <- outcome{res, err, time.Now()}
			}()
			b.lines.wait(t, fmt.Sprintf("running %d", round))
			if i%2 == 1 {
				<-b.inQuery
			}
		}
		// Kill half of them, chosen at random; the others go on: the ones
		// in a bridge call get their answer, the endless loops are
		// cancelled.
		killed := map[int]time.Time{}
		for _, i := range rand.Perm(len(boxes))[:len(boxes)/2] {
			pid := boxes[i].sb.Info().PID
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed[i] = time.Now()
		}
		for i, b := range boxes {
			if _, ok := killed[i]; !ok {
				if i%2 == 1 {
					b.answer <- fmt.Sprintf("answer %d", round)
				} else {
					b.sb.Cancel()
				}
			}
		}
		for i, b := range boxes {
			o := <-done[i]
			if at, ok := killed[i]; ok {
				took := o.returned.Sub(at)
				worst = max(worst, took)
				if !errors.Is(o.err, supervisor.ErrWorkerExited) {
					t.Errorf("round %d, killed sandbox %d: %v, want ErrWorkerExited", round, i, o.err)
				}
				if took > 100*time.Millisecond {
					t.Errorf("round %d, killed sandbox %d: the call returned %v after the kill, want within 100 ms", round, i, took)
				}
				if err := b.sb.Restart(ctx); err != nil {
					t.Fatalf("restart: %v", err)
				}
				if err := b.sb.Initialize(ctx, ""); err != nil {
					t.Fatalf("initialize after restart: %v", err)
				}
			} else if i%2 == 1 {
				if want := fmt.Sprintf("running %d\nanswer %d\n", round, round); o.err != nil || o.res.Stdout != want || o.res.Error != "" {
					t.Errorf("round %d, sandbox %d (not killed, in a bridge call): %+v, %v; want stdout %q", round, i, o.res, o.err, want)
				}
			} else if !errors.Is(o.err, supervisor.ErrCanceled) {
				t.Errorf("round %d, sandbox %d (not killed, cancelled): %v, want ErrCanceled", round, i, o.err)
			}
			if res, err := b.sb.Execute(ctx, "print(6*7)"); err != nil || res.Stdout != "42\n" {
				t.Errorf("round %d, sandbox %d afterwards: %+v, %v", round, i, res, err)
			}
		}
	}
	t.Logf("%d rounds × %d sandboxes, half killed each round: the slowest killed call returned %v after its kill", rounds, sandboxes, worst)
}

const childSupervisorEnv = "RLM_SOAK_CHILD_SUPERVISOR"

// A child supervisor (TestSupervisorKilled): it starts workers running
// endless loops, prints their pids and waits to be killed.
func init() {
	n := os.Getenv(childSupervisorEnv)
	if n == "" {
		return
	}
	var count int
	fmt.Sscan(n, &count)
	ctx := context.Background()
	for range count {
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, Timeout: -1})
		if err == nil {
			err = sb.Initialize(ctx, "")
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("worker", sb.Info().PID)
		go sb.Execute(ctx, "while True: pass")
	}
	fmt.Println("ready")
	select {}
}

// TestSupervisorKilled kills a supervisor process with SIGKILL: all its
// workers must be gone within a second.
func TestSupervisorKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childSupervisorEnv, soakSize(3, 8)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			break
		}
		var pid int
		if _, err := fmt.Sscanf(line, "worker %d", &pid); err != nil {
			t.Fatalf("child supervisor: %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("the child supervisor started no worker (%v)", sc.Err())
	}
	for _, pid := range pids {
		if processGone(pid) {
			t.Fatalf("worker %d gone before the kill", pid)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitGone(t, pids, time.Second)
	t.Logf("%d workers gone %v after their supervisor was killed", len(pids), time.Since(killed).Round(time.Millisecond))
}
