package runtime

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
)

// Benchmarks of a fresh interpreter. Run with `make bench`.

func benchConfig() Config {
	return Config{Notice: io.Discard}.withDefaults()
}

func BenchmarkCompileFromCache(b *testing.B) {
	ctx := context.Background()
	cfg := benchConfig()
	if _, err := loadEngine(ctx, cfg); err != nil {
		b.Fatal(err) // warms the on-disk caches
	}
	var wasm, stdlib []byte
	var wasmHash string
	if d := cfg.Distribution; d != nil {
		wasm, _ = d.ReadFile(fileWasm)
		stdlib, _ = d.ReadFile(fileStdlib)
	} else {
		opts, err := cfg.loadOptions()
		if err != nil {
			b.Fatal(err)
		}
		files, err := distload.Load(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		wasm, stdlib = files.Files[fileWasm], files.Files[fileStdlib]
		wasmHash = files.SHA256[fileWasm]
	}
	wasm, wasmHash, err := translated(ctx, cfg, wasm, wasmHash)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		e, err := compile(ctx, wasm, stdlib, wasmHash, distload.SHA256(stdlib), cfg.CacheDir, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		e.rt.Close(ctx)
	}
}

// BenchmarkNew measures New on a warm engine, split into instantiation
// (modules, host state, constructors) and CPython initialisation (with the
// sandbox's bootstrap).
func BenchmarkNew(b *testing.B) {
	ctx := context.Background()
	cfg := benchConfig()
	var inst, initz time.Duration
	for b.Loop() {
		in, err := New(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		inst += in.timings.instantiate
		initz += in.timings.initialize
		in.Close()
	}
	b.ReportMetric(float64(inst.Microseconds())/float64(b.N)/1000, "ms-instantiate/op")
	b.ReportMetric(float64(initz.Microseconds())/float64(b.N)/1000, "ms-init/op")
}

func newBench(b *testing.B) *Interpreter {
	b.Helper()
	in, err := New(context.Background(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close() })
	return in
}

func execOK(b *testing.B, in *Interpreter, code string, out Output) {
	res, err := in.Exec(context.Background(), code, out)
	if err != nil {
		b.Fatal(err)
	}
	if res.Error != nil {
		b.Fatal(res.Error.Traceback)
	}
}

func BenchmarkFirstImport(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		in := newBench(b)
		b.StartTimer()
		execOK(b, in, "import re, json, collections", Output{})
		b.StopTimer()
		in.Close()
		b.StartTimer()
	}
}

func BenchmarkPrintRoundTrip(b *testing.B) {
	in := newBench(b)
	var sb strings.Builder
	for b.Loop() {
		execOK(b, in, "print('x')", Output{Stdout: &sb})
	}
	if !strings.HasPrefix(sb.String(), "x\n") {
		b.Fatalf("output %q", sb.String()[:10])
	}
}

func BenchmarkSumSquares(b *testing.B) {
	in := newBench(b)
	for b.Loop() {
		execOK(b, in, "sum(i*i for i in range(3_000_000))", Output{})
	}
}

// signalWriter closes started the first time something is written.
type signalWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

// BenchmarkInterruptLatency measures the time from storing SIGINT to the
// return of Exec running `while True: pass`.
func BenchmarkInterruptLatency(b *testing.B) {
	in := newBench(b)
	var total, pickup time.Duration
	for b.Loop() {
		w := &signalWriter{started: make(chan struct{})}
		done := make(chan time.Time, 1)
		go func() {
			res, err := in.Exec(context.Background(), "print('go', flush=True)\nwhile True: pass", Output{Stdout: w})
			done <- time.Now()
			if err != nil || res.Error == nil || res.Error.Type != "KeyboardInterrupt" {
				panic("no KeyboardInterrupt")
			}
		}()
		<-w.started
		time.Sleep(time.Millisecond) // let the loop run
		t0 := time.Now()
		in.Interrupt()
		total += (<-done).Sub(t0)
		pickup += time.Unix(0, in.host.LastDelivery()).Sub(t0)
	}
	b.ReportMetric(float64(pickup.Microseconds())/float64(b.N), "µs-pickup/op")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-return/op")
}
