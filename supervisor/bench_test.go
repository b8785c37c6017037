package supervisor_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/benchmode"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// Benchmarks of the public API. Worker benchmarks use bin/rlm-worker, which
// `make` builds (`make bench` runs them).

func benchConfig(b *testing.B, mode supervisor.WorkerMode) supervisor.Config {
	b.Helper()
	cfg := supervisor.Config{UseWorker: mode}
	if mode == supervisor.WorkerAlways && os.Getenv("RLM_WORKER") == "" {
		p, _ := filepath.Abs("../bin/rlm-worker")
		cfg.WorkerPath = p
	}
	return cfg
}

// benchModes are the modes each benchmark runs in (benchmode.All).
var benchModes = benchmode.All()

// BenchmarkNewReady: from New to a sandbox that has answered Initialize.
func BenchmarkNewReady(b *testing.B) {
	ctx := context.Background()
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			warm, err := supervisor.New(ctx, cfg) // compile caches, engine
			if err != nil {
				b.Fatal(err)
			}
			warm.Destroy()
			for b.Loop() {
				sb, err := supervisor.New(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.Initialize(ctx, "ctx"); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				sb.Destroy()
				b.StartTimer()
			}
		})
	}
}

func readySandbox(b *testing.B, cfg supervisor.Config) supervisor.Sandbox {
	b.Helper()
	sb, err := supervisor.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Destroy() })
	if err := sb.Initialize(context.Background(), ""); err != nil {
		b.Fatal(err)
	}
	return sb
}

// BenchmarkExecutePass: the round trip of Execute("pass").
func BenchmarkExecutePass(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			sb := readySandbox(b, benchConfig(b, m.Mode))
			for b.Loop() {
				if _, err := sb.Execute(context.Background(), "pass"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCancelLatency: from Cancel() to the return of an Execute running
// `while True: pass` (KeyboardInterrupt through the shared page in worker
// mode), including the traceback formatting of the KeyboardInterrupt.
func BenchmarkCancelLatency(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			lat := benchCancel(b, m.Mode, "while True: pass")
			b.ReportMetric(float64(lat.total.Microseconds())/float64(b.N), "µs-cancel/op")
			lat.report(b)
		})
	}
}

// BenchmarkCancelSleep: from Cancel() to the return of an Execute waiting
// in time.sleep(60), whose wait the interrupt must cut short.
func BenchmarkCancelSleep(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			lat := benchCancel(b, m.Mode, "import time\ntime.sleep(60)")
			lat.report(b)
		})
	}
}

// benchCancel times, b.N times on one sandbox, Cancel() to the return of
// an Execute of code, which blocks.
func benchCancel(b *testing.B, mode supervisor.WorkerMode, code string) *latencies {
	cfg := benchConfig(b, mode)
	started := onGo(&cfg)
	sb := readySandbox(b, cfg)
	lat := &latencies{}
	for b.Loop() {
		done := make(chan time.Time, 1)
		go func() {
			sb.Execute(context.Background(), "print('go', flush=True)\n"+code)
			done <- time.Now()
		}()
		<-started
		t0 := time.Now()
		sb.Cancel()
		lat.add((<-done).Sub(t0))
	}
	return lat
}

// onGo makes cfg's OnStdout signal the returned channel when the code
// prints a line starting with "go" (it has started and is about to block).
func onGo(cfg *supervisor.Config) <-chan struct{} {
	started := make(chan struct{}, 1)
	cfg.OnStdout = func(l string) {
		if strings.HasPrefix(l, "go") {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}
	return started
}

// latencies collects the durations of single operations of a benchmark
// and reports their median and, over at least 100 of them, their 99th
// percentile (of fewer, it would be their maximum).
type latencies struct {
	d     []time.Duration
	total time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.d = append(l.d, d)
	l.total += d
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(q float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(q*float64(len(l.d))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.5), "µs-median")
	if len(l.d) >= 100 {
		b.ReportMetric(at(0.99), "µs-p99")
	}
}

// BenchmarkExecuteStatement: the round trip of Execute("x = x + 1") on a
// warm sandbox, the shape of an agent's inner loop, with its median and
// 99th percentile.
func BenchmarkExecuteStatement(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			sb := readySandbox(b, benchConfig(b, m.Mode))
			ctx := context.Background()
			if _, err := sb.Execute(ctx, "x = 0"); err != nil {
				b.Fatal(err)
			}
			var lat latencies
			for b.Loop() {
				t0 := time.Now()
				ce, err := sb.Execute(ctx, "x = x + 1")
				lat.add(time.Since(t0))
				if err != nil || ce.Error != "" {
					b.Fatal(err, ce.Error)
				}
			}
			lat.report(b)
		})
	}
}

// BenchmarkLLMQuery: the round trip of one llm_query from Python to a host
// callback that answers at once, and back: an Execute of 100 calls in a
// loop, its duration divided by 100 (so the Execute's own cost, that of
// BenchmarkExecutePass, is in the figure, about 1 µs per call).
func BenchmarkLLMQuery(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			cfg.OnLLMQuery = func(_ context.Context, p string) (string, error) { return p, nil }
			sb := readySandbox(b, cfg)
			const calls = 100
			code := "for _ in range(100): llm_query('ping')"
			var total time.Duration
			for b.Loop() {
				ce, err := sb.Execute(context.Background(), code)
				if err != nil || ce.Error != "" || ce.BridgeCalls != calls {
					b.Fatal(err, ce.Error)
				}
				total += ce.Duration
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N*calls), "µs-per-call")
		})
	}
}

// BenchmarkReadyWithLargeContext: from New to a sandbox whose `context` is
// a 50 MB string.
func BenchmarkReadyWithLargeContext(b *testing.B) {
	ctx := context.Background()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50<<20/45)
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			warm, err := supervisor.New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			warm.Destroy()
			var initTotal time.Duration
			for b.Loop() {
				sb, err := supervisor.New(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := sb.Initialize(ctx, text); err != nil {
					b.Fatal(err)
				}
				initTotal += time.Since(t0)
				b.StopTimer()
				sb.Destroy()
				b.StartTimer()
			}
			b.ReportMetric(float64(initTotal.Milliseconds())/float64(b.N), "ms-initialize/op")
		})
	}
}

// BenchmarkPoolGet: from Pool.Get to a sandbox that has answered
// Initialize, when the pool has one ready (compare BenchmarkNewReady).
func BenchmarkPoolGet(b *testing.B) {
	ctx := context.Background()
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			pool := supervisor.NewPool(benchConfig(b, m.Mode), 1)
			defer pool.Close()
			for b.Loop() {
				b.StopTimer()
				for pool.Idle() == 0 { // wait for the refill, untimed
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
				sb, err := pool.Get(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.Initialize(ctx, "ctx"); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				sb.Destroy()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkLLMQueryBatched: one llm_query_batched of 100 prompts answered
// at once by the host, per Execute (minus the cost of an Execute measured
// by BenchmarkExecutePass).
func BenchmarkLLMQueryBatched(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			cfg.OnLLMQuery = func(_ context.Context, p string) (string, error) { return p, nil }
			sb := readySandbox(b, cfg)
			const prompts = 100
			ctx := context.Background()
			if _, err := sb.Execute(ctx, "prompts = [f'prompt {i}' for i in range(100)]"); err != nil {
				b.Fatal(err)
			}
			var lat latencies
			for b.Loop() {
				ce, err := sb.Execute(ctx, "r = llm_query_batched(prompts)")
				if err != nil || ce.Error != "" || ce.BridgeCalls != prompts {
					b.Fatal(err, ce.Error)
				}
				lat.add(ce.Duration)
			}
			lat.report(b)
		})
	}
}

// BenchmarkOutputThroughput: a program printing 100 MiB in lines of 1 KiB,
// with the default MaxOutputLength and an OnStdout that discards the lines.
func BenchmarkOutputThroughput(b *testing.B) {
	const lines, lineSize = 100 << 10, 1 << 10
	code := "line = 'x' * 1023\nfor _ in range(102400): print(line)"
	for _, m := range benchModes {
		b.Run(m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			var got int
			cfg.OnStdout = func(l string) { got++ }
			sb := readySandbox(b, cfg)
			b.SetBytes(lines * lineSize)
			for b.Loop() {
				got = 0
				ce, err := sb.Execute(context.Background(), code)
				if err != nil || ce.Error != "" || got != lines || !ce.Truncated {
					b.Fatal(err, ce.Error, got)
				}
			}
		})
	}
}
