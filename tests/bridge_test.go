package tests

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// slowGrace is the grace period of tests that check the interrupt path:
// long enough that formatting the KeyboardInterrupt's traceback is never
// mistaken for ignoring it, even under the race detector.
const slowGrace = 30 * time.Second

func upper(_ context.Context, prompt string) (string, error) { return strings.ToUpper(prompt), nil }

func TestLLMQuery(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: upper}, "")
		ce := exec(t, sb, "a = llm_query('hello')\nprint(a, type(a).__name__)")
		if ce.Stdout != "HELLO str\n" || ce.BridgeCalls != 1 || ce.Error != "" {
			t.Fatalf("%+v", ce)
		}
	})
}

func TestLLMQueryBatched(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		const limit = 3
		var inflight, peak atomic.Int32
		var mu sync.Mutex
		arrived := 0
		full := make(chan struct{})
		cfg := supervisor.Config{MaxBridgeConcurrency: limit, OnLLMQuery: func(ctx context.Context, p string) (string, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				if old := peak.Load(); n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			// The first `limit` calls wait for each other: they can only
			// all arrive if they run concurrently.
			mu.Lock()
			arrived++
			if arrived == limit {
				close(full)
			}
			first := arrived <= limit
			mu.Unlock()
			if first {
				select {
				case <-full:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "<" + p + ">", nil
		}}
		sb := newSandbox(t, m, cfg, "")
		ce := exec(t, sb, "r = llm_query_batched([str(i) for i in range(20)])\nprint(r == ['<%d>' % i for i in range(20)])")
		if ce.Stdout != "True\n" || ce.BridgeCalls != 20 {
			t.Fatalf("%+v", ce)
		}
		if p := peak.Load(); p != limit {
			t.Errorf("peak concurrency %d, want %d", p, limit)
		}
	})
}

func TestBridgeErrors(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := supervisor.Config{OnLLMQuery: func(_ context.Context, p string) (string, error) {
			if strings.HasPrefix(p, "bad") {
				return "", errors.New("model overloaded: " + p)
			}
			return p + "!", nil
		}}
		sb := newSandbox(t, m, cfg, "")
		ce := exec(t, sb, `
try:
    llm_query("bad one")
except BridgeError as e:
    print("single:", e)
try:
    llm_query_batched(["ok", "bad two", "bad three"])
except BridgeError as e:
    print("batched:", e, e.index)
r = llm_query_batched(["ok", "bad four"], return_exceptions=True)
print(r[0], type(r[1]).__name__, r[1], r[1].index)
try:
    rlm_query("x")
except BridgeError as e:
    print("missing:", e)
`)
		want := "single: model overloaded: bad one\n" +
			"batched: model overloaded: bad two 1\n" +
			"ok! BridgeError model overloaded: bad four 1\n" +
			"missing: rlm_query is not available: the host set no OnRLMQuery callback\n"
		if ce.Stdout != want || ce.Error != "" {
			t.Fatalf("stdout %q, want %q (error %s)", ce.Stdout, want, ce.Traceback)
		}
		ce = exec(t, sb, "llm_query('bad five')")
		if ce.ErrorType != "BridgeError" || ce.Error != "BridgeError: model overloaded: bad five" {
			t.Fatalf("uncaught: %+v", ce)
		}
		// The traceback points at the call, not into the helpers.
		if strings.Contains(ce.Traceback, "<rlm>") || !strings.Contains(ce.Traceback, "llm_query('bad five')") {
			t.Fatalf("traceback:\n%s", ce.Traceback)
		}
		ce = exec(t, sb, "llm_query(42)")
		if ce.ErrorType != "TypeError" || ce.BridgeCalls != 0 {
			t.Fatalf("non-str prompt: %+v", ce)
		}
	})
}

func TestRLMQueryContext(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var seen []any
		cfg := supervisor.Config{OnRLMQuery: func(_ context.Context, task string, c any) (string, error) {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			return fmt.Sprintf("%s:%T", task, c), nil
		}}
		doc := strings.Repeat("the corpus ", 1000)
		sb := newSandbox(t, m, cfg, doc)
		ce := exec(t, sb, `
context = "rebound by the code"
print(rlm_query("a"))
print(rlm_query("b", ctx={"k": [1, 2]}))
print(rlm_query_batched(["c", ("d", "own")]))
`)
		if ce.Stdout != "a:string\nb:map[string]interface {}\n['c:string', 'd:string']\n" {
			t.Fatalf("stdout %q %s", ce.Stdout, ce.Traceback)
		}
		if seen[0] != doc || seen[2] != doc && seen[3] != doc {
			t.Errorf("omitted ctx did not pass the sandbox's context")
		}
		if !reflect.DeepEqual(seen[1], map[string]any{"k": []any{int64(1), int64(2)}}) {
			t.Errorf("explicit ctx arrived as %#v", seen[1])
		}
		if !reflect.DeepEqual([]any{seen[2], seen[3]}, []any{doc, "own"}) && !reflect.DeepEqual([]any{seen[2], seen[3]}, []any{"own", doc}) {
			t.Errorf("batched contexts %v", seen[2:])
		}
	})
}

// blockingBridge is a callback that blocks until its context is cancelled
// (or, when stubborn, until the test ends), reporting when it starts.
func blockingBridge(t *testing.T, stubborn bool) (func(context.Context, string) (string, error), <-chan struct{}, <-chan struct{}) {
	started := make(chan struct{}, 10)
	cancelled := make(chan struct{})
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	var once sync.Once
	return func(ctx context.Context, _ string) (string, error) {
		started <- struct{}{}
		if stubborn {
			<-end
			return "late", nil
		}
		<-ctx.Done()
		once.Do(func() { close(cancelled) })
		return "", ctx.Err()
	}, started, cancelled
}

func TestCancelWhileInBridge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stubborn bool
		call     string
	}{
		{"single", false, "llm_query('slow')"},
		{"single/stubborn", true, "llm_query('slow')"},
		{"batch", false, "llm_query_batched(['slow', 'slower', 'slowest'])"},
		{"batch/stubborn", true, "llm_query_batched(['slow', 'slower', 'slowest'])"},
	} {
		stubborn := tc.stubborn
		t.Run(tc.name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, m mode) {
				fn, started, cancelled := blockingBridge(t, stubborn)
				sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: fn, GracePeriod: slowGrace}, "")
				go func() {
					<-started
					sb.Cancel()
				}()
				ce, err := sb.Execute(context.Background(), "print('asking')\n"+tc.call)
				if !errors.Is(err, supervisor.ErrCanceled) {
					t.Fatalf("err %v", err)
				}
				if ce.ErrorType != "KeyboardInterrupt" || ce.Stdout != "asking\n" {
					t.Fatalf("%+v", ce)
				}
				if !stubborn {
					<-cancelled // the callback's context was cancelled
				}
				// The sandbox is usable afterwards.
				if ce := exec(t, sb, "print(1 + 1)"); ce.Stdout != "2\n" {
					t.Fatalf("after cancel: %+v", ce)
				}
			})
		})
	}
}

func TestTimeoutExcludesBridgeWait(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		const timeout = 500 * time.Millisecond
		slow := func(ctx context.Context, p string) (string, error) {
			select { // an LLM that takes longer than the timeout to answer
			case <-time.After(timeout):
				return p, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		sb := newSandbox(t, m, supervisor.Config{Timeout: timeout, OnLLMQuery: slow, GracePeriod: slowGrace}, "")
		ce, err := sb.Execute(context.Background(), "print([llm_query(str(i)) for i in range(3)])")
		if err != nil || ce.Stdout != "['0', '1', '2']\n" {
			t.Fatalf("err %v, %+v", err, ce)
		}
		if ce.BridgeCalls != 3 || ce.PythonDuration >= timeout || ce.Duration < 3*timeout {
			t.Fatalf("calls %d, python %v, wall %v", ce.BridgeCalls, ce.PythonDuration, ce.Duration)
		}
		// Python time still counts, bridge calls or not.
		ce, err = sb.Execute(context.Background(), "llm_query('x')\nprint('spinning')\nwhile True: pass")
		if !errors.Is(err, supervisor.ErrTimeout) || ce.Stdout != "x\n"[:0]+"spinning\n" {
			t.Fatalf("err %v, %+v", err, ce)
		}
	})
}

func TestWallTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		fn, _, cancelled := blockingBridge(t, false)
		sb := newSandbox(t, m, supervisor.Config{WallTimeout: 300 * time.Millisecond, OnLLMQuery: fn, GracePeriod: slowGrace}, "")
		ce, err := sb.Execute(context.Background(), "print('waiting')\nllm_query('forever')")
		if !errors.Is(err, supervisor.ErrTimeout) || ce.ErrorType != "KeyboardInterrupt" || ce.Stdout != "waiting\n" {
			t.Fatalf("err %v, %+v", err, ce)
		}
		<-cancelled
	})
}

// Answers that are not valid UTF-8 (a shell command printing Latin-1, say)
// still arrive as str, with U+FFFD for the bad bytes.
func TestBridgeInvalidUTF8(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := supervisor.Config{OnLLMQuery: func(context.Context, string) (string, error) { return "caf\xe9!", nil }}
		sb := newSandbox(t, m, cfg, "")
		ce := exec(t, sb, "print(ascii(llm_query('x')))")
		if ce.Stdout != "'caf\\ufffd!'\n" {
			t.Fatalf("%+v", ce)
		}
		if err := sb.SetVariable(context.Background(), "v", "a\xffb"); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(ascii(v))"); ce.Stdout != "'a\\ufffdb'\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

// A bridge call that takes its time (an LLM answering in seconds) does not
// hold up the sandbox's other requests: Stats answers while the callback
// still runs, then the call completes, and the next calls take the fast
// path again.
func TestStatsDuringBridgeCall(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var slow atomic.Bool
		slow.Store(true)
		fn := func(ctx context.Context, p string) (string, error) {
			if !slow.Load() {
				return p, nil
			}
			started <- struct{}{}
			select {
			case <-release:
				return "answer", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: fn}, "")
		type result struct {
			ce  *supervisor.CodeExecution
			err error
		}
		done := make(chan result, 1)
		go func() {
			ce, err := sb.Execute(context.Background(), "print(llm_query('slow'))\nprint([llm_query(str(i)) for i in range(3)])")
			done <- result{ce, err}
		}()
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := sb.Stats(ctx) // must not wait for the callback
		if err != nil {
			t.Fatalf("stats during a bridge call: %v", err)
		}
		if st.LinearMemoryBytes == 0 {
			t.Fatalf("stats %+v", st)
		}
		slow.Store(false)
		close(release)
		r := <-done
		if r.err != nil || r.ce.Stdout != "answer\n['0', '1', '2']\n" || r.ce.BridgeCalls != 4 {
			t.Fatalf("err %v, %+v", r.err, r.ce)
		}
	})
}

// TestDestroyStopsCallbacks: Destroy during a batch of llm_query calls
// cancels the context of the callback in flight before it returns, and
// no callback starts after it, in both modes (in direct mode the batch
// went on calling the host, with live contexts, until the interpreter
// noticed, up to 170 ms later).
func TestDestroyStopsCallbacks(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var started, after atomic.Int32
		var destroyed atomic.Bool
		inFlight, released := make(chan context.Context, 1), make(chan struct{})
		sb := newSandbox(t, m, supervisor.Config{
			MaxBridgeConcurrency: 1,
			OnLLMQuery: func(ctx context.Context, p string) (string, error) {
				if destroyed.Load() {
					after.Add(1)
				}
				if started.Add(1) == 3 {
					inFlight <- ctx
					<-released // a model call that ignores its context
				}
				return "x", nil
			},
		}, "")
		done := make(chan error, 1)
		go func() {
			_, err := sb.Execute(context.Background(), "llm_query_batched(['p%d' % i for i in range(200)])")
			done <- err
		}()
		var ctx context.Context
		select {
		case ctx = <-inFlight:
		case err := <-done:
			t.Fatalf("the batch ended before its third call: %v", err)
		}
		if err := sb.Destroy(); err != nil {
			t.Fatal(err)
		}
		destroyed.Store(true)
		if ctx.Err() == nil {
			t.Error("the context of the callback in flight was not cancelled when Destroy returned")
		}
		close(released)
		err := <-done
		if !errors.Is(err, supervisor.ErrDestroyed) && !errors.Is(err, supervisor.ErrWorkerExited) {
			t.Fatalf("Execute: %v", err)
		}
		if n := strings.Count(err.Error(), supervisor.ErrDestroyed.Error()); n > 1 {
			t.Errorf("Execute: %v (says it %d times)", err, n)
		}
		if n := after.Load(); n != 0 {
			t.Errorf("%d callbacks started after Destroy", n)
		}
	})
}

// TestBatchGoroutinesBounded: a batch of 20,000 prompts whose callbacks
// take their time has MaxBridgeConcurrency of them running and the rest
// waiting without a goroutine each, in both modes (a goroutine per call,
// 5 KB of the host's memory each, made a batch of a million take 5 GB);
// every call is still answered, in order.
func TestBatchGoroutinesBounded(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		const n = 20_000
		var running, most atomic.Int32
		release := make(chan struct{})
		sb := newSandbox(t, m, supervisor.Config{
			MaxBridgeConcurrency: 4,
			OnLLMQuery: func(ctx context.Context, p string) (string, error) {
				if r := running.Add(1); r > most.Load() {
					most.Store(r)
				}
				defer running.Add(-1)
				<-release
				return strings.ToUpper(p), nil
			},
		}, "")
		base := goruntime.NumGoroutine()
		done := make(chan *supervisor.CodeExecution, 1)
		go func() {
			ce, err := sb.Execute(context.Background(), fmt.Sprintf(
				"r = llm_query_batched(['p%%d' %% i for i in range(%d)])\nprint(len(r), r[0], r[-1], all(a == 'P%%d' %% i for i, a in enumerate(r)))", n))
			if err != nil {
				t.Error(err)
			}
			done <- ce
		}()
		// The calls arrive within milliseconds; a goroutine each showed at once.
		peak := 0
		for range 200 {
			peak = max(peak, goruntime.NumGoroutine()-base)
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		ce := <-done
		if want := fmt.Sprintf("%d P0 P%d True\n", n, n-1); ce == nil || ce.Stdout != want {
			t.Fatalf("execution %+v, want stdout %q", ce, want)
		}
		if peak > 200 || most.Load() > 4 {
			t.Fatalf("%d goroutines more while the batch waited, %d callbacks at once", peak, most.Load())
		}
	})
}
