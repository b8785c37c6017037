package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// procMemory is what /proc says of a process's memory, in bytes.
type procMemory struct {
	RSS, HWM, Anon, File, Pss uint64
}

// readProcMemory reads VmRSS, VmHWM, RssAnon, RssFile (/proc/PID/status)
// and Pss (/proc/PID/smaps_rollup: each shared page counted once across
// the processes that map it).
func readProcMemory(pid int) (procMemory, error) {
	var m procMemory
	fields := map[string]*uint64{"VmRSS:": &m.RSS, "VmHWM:": &m.HWM, "RssAnon:": &m.Anon, "RssFile:": &m.File, "Pss:": &m.Pss}
	for _, name := range []string{"status", "smaps_rollup"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			return m, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) == 3 && w[2] == "kB" {
				if p, ok := fields[w[0]]; ok && *p == 0 {
					kb, _ := strconv.ParseUint(w[1], 10, 64)
					*p = kb << 10
				}
			}
		}
		f.Close()
	}
	return m, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// idleWorker starts a worker sandbox that has run one statement.
func idleWorker(tb testing.TB) supervisor.Sandbox {
	tb.Helper()
	ctx := context.Background()
	sb, err := supervisor.New(ctx, workerMode.cfg(supervisor.Config{}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sb.Destroy() })
	if err := sb.Initialize(ctx, "x"); err != nil {
		tb.Fatal(err)
	}
	if _, err := sb.Execute(ctx, "y = 1"); err != nil {
		tb.Fatal(err)
	}
	return sb
}

func workerMemory(tb testing.TB, sb supervisor.Sandbox) procMemory {
	tb.Helper()
	m, err := readProcMemory(sb.Info().PID)
	if err != nil {
		tb.Skipf("no /proc here: %v", err)
	}
	return m
}

// BenchmarkWorkerMemory reports what real worker processes hold, read
// from /proc: one idle worker, ten idle workers (Pss: what they share is
// counted once), and a worker given a large context (Initialize time and
// peak RSS).
func BenchmarkWorkerMemory(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		var m procMemory
		for b.Loop() {
			b.StopTimer()
			sb := idleWorker(b)
			m = workerMemory(b, sb)
			sb.Destroy()
			b.StartTimer()
		}
		b.ReportMetric(mib(m.RSS), "MiB-rss")
		b.ReportMetric(mib(m.Anon), "MiB-anon")
		b.ReportMetric(mib(m.Pss), "MiB-pss")
	})
	b.Run("ten-idle", func(b *testing.B) {
		var pss, rss uint64
		for b.Loop() {
			b.StopTimer()
			sbs := make([]supervisor.Sandbox, 10)
			for i := range sbs {
				sbs[i] = idleWorker(b)
			}
			pss, rss = 0, 0
			for _, sb := range sbs {
				m := workerMemory(b, sb)
				pss += m.Pss
				rss += m.RSS
				sb.Destroy()
			}
			b.StartTimer()
		}
		b.ReportMetric(mib(pss)/10, "MiB-pss-each")
		b.ReportMetric(mib(rss)/10, "MiB-rss-each")
	})
	for _, tc := range []struct {
		name string
		unit string
		size int
	}{
		{"context-50MB-ascii", "abcdefghij", 50_000_000},
		{"context-50MB-utf8", "café ☕ 日本 ", 50_000_000},
		{"context-1GiB-ascii", "abcdefghij", 1 << 30},
	} {
		b.Run(tc.name, func(b *testing.B) {
			text := strings.Repeat(tc.unit, tc.size/len(tc.unit))
			var d time.Duration
			var m procMemory
			for b.Loop() {
				b.StopTimer()
				sb := idleWorker(b)
				b.StartTimer()
				start := time.Now()
				if err := sb.Initialize(context.Background(), text); err != nil {
					b.Fatal(err)
				}
				d += time.Since(start)
				b.StopTimer()
				m = workerMemory(b, sb)
				sb.Destroy()
				b.StartTimer()
			}
			b.ReportMetric(float64(d.Milliseconds())/float64(b.N), "ms-initialize")
			b.ReportMetric(mib(m.HWM), "MiB-peak-rss")
			b.ReportMetric(mib(m.RSS), "MiB-rss-after")
		})
	}
}

// TestWorkerPeakMemoryLargeContext: a 100 MB context costs a worker about
// three times its size at the peak (the staging buffer, the str in the
// guest, and bounded garbage), not the seven it cost when every Stage
// frame stayed on the heap until a collection.
func TestWorkerPeakMemoryLargeContext(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 100 MB")
	}
	sb := idleWorker(t)
	const size = 100 << 20
	if err := sb.Initialize(context.Background(), strings.Repeat("0123456789abcdef", size/16)); err != nil {
		t.Fatal(err)
	}
	m := workerMemory(t, sb)
	t.Logf("peak RSS %.0f MiB", mib(m.HWM))
	if limit := uint64(4 * size); m.HWM > limit {
		t.Errorf("worker peak RSS %.0f MiB for a %d MiB context (limit %d MiB)", mib(m.HWM), size>>20, limit>>20)
	}
	if ce := exec(t, sb, "print(len(context), context[-16:])"); ce.Stdout != fmt.Sprintf("%d 0123456789abcdef\n", size) {
		t.Errorf("stdout %q", ce.Stdout)
	}
}

// TestMemoryLimitRange: a MemoryLimit the interpreter cannot enforce
// (below the ~30 MiB it boots with) or address (above 4 GiB) is refused
// by New, NewPool's Get and runtime.New, with an error matching
// runtime.ErrMemoryLimit, in both modes; the ends of the range start.
func TestMemoryLimitRange(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ctx := context.Background()
		for _, limit := range []uint64{1, 16 << 20, runtime.MinMemoryLimit - 1, runtime.MaxMemoryLimit + 1} {
			sb, err := supervisor.New(ctx, m.cfg(supervisor.Config{MemoryLimit: limit}))
			if !errors.Is(err, runtime.ErrMemoryLimit) {
				if sb != nil {
					sb.Destroy()
				}
				t.Errorf("New with MemoryLimit %d: %v, want ErrMemoryLimit", limit, err)
			}
		}
		p := supervisor.NewPool(m.cfg(supervisor.Config{MemoryLimit: 1 << 20}), 1)
		defer p.Close()
		if sb, err := p.Get(ctx); !errors.Is(err, runtime.ErrMemoryLimit) {
			if sb != nil {
				sb.Destroy()
			}
			t.Errorf("Pool.Get with MemoryLimit 1 MiB: %v, want ErrMemoryLimit", err)
		}
		for _, limit := range []uint64{runtime.MinMemoryLimit, runtime.MaxMemoryLimit} {
			sb := newSandbox(t, m, supervisor.Config{MemoryLimit: limit}, "")
			if ce := exec(t, sb, "print(len('x' * 1000))"); ce.Stdout != "1000\n" {
				t.Errorf("MemoryLimit %d: stdout %q", limit, ce.Stdout)
			}
		}
	})
	if _, err := runtime.New(context.Background(), runtime.Config{MemoryLimit: 16 << 20}); !errors.Is(err, runtime.ErrMemoryLimit) {
		t.Errorf("runtime.New with MemoryLimit 16 MiB: %v, want ErrMemoryLimit", err)
	}
}
