package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// run executes code and returns its stdout, failing the test on an error
// or an exception.
func run(t *testing.T, in *runtime.Interpreter, code string) string {
	t.Helper()
	var out, errb strings.Builder
	res, err := in.Exec(context.Background(), code, runtime.Output{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("%s\n%s", res.Error, res.Error.Traceback)
	}
	return out.String()
}

func TestBridge(t *testing.T) {
	var got []string
	in := newInterp(t, runtime.Config{Bridge: func(ctx context.Context, method string, args []any) (any, error) {
		got = append(got, fmt.Sprintf("%s %v", method, args))
		if s, _ := args[0].(string); s == "fail" {
			return nil, errors.New("the model is down")
		}
		return strings.ToUpper(fmt.Sprint(args...)), nil
	}})
	out := run(t, in, `
print(llm_query("hello"))
print(rlm_query("task"))
print(rlm_query("task", ctx=[1, {"a": 2}]))
print(rlm_query("task", None), rlm_query_batched([("t", None)]), rlm_query_batched(["u"]))
try:
    llm_query("fail")
except BridgeError as e:
    print("caught", e)
print(type(llm_query("x")).__name__, llm_query.__module__)
`)
	// An explicit None is a context like any other; only an omitted ctx
	// stands for the sandbox's (the host adds it: args of one).
	want := "HELLO\nTASK\nTASK[1 MAP[A:2]]\nTASK<NIL> ['T<NIL>'] ['U']\ncaught the model is down\nstr rlm\n"
	if out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if len(got) != 8 || got[0] != "llm_query [hello]" || got[1] != "rlm_query [task]" ||
		got[2] != "rlm_query [task [1 map[a:2]]]" || got[3] != "rlm_query [task <nil>]" ||
		got[4] != "rlm_query [t <nil>]" || got[5] != "rlm_query [u]" {
		t.Errorf("host saw %q", got)
	}
}

// TestLLMQueryShortPath: llm_query takes a path of its own to the host
// (/dev/rlm-llm, no marshal data); its answers, errors and the prompts the
// host sees are those of the marshal path llm_query_batched takes.
func TestLLMQueryShortPath(t *testing.T) {
	long := strings.Repeat("é", 40000) // 80,000 bytes: the long reply
	answers := map[string]any{
		"plain":   "answer",
		"empty":   "",
		"unicode": "é☃😀",
		"long":    long,
		"bad":     "a\xffb",
		"int":     int64(42),
		"list":    []any{int64(1), "x"},
		"chan":    make(chan int),
	}
	var seen []string
	in := newInterp(t, runtime.Config{Bridge: func(_ context.Context, method string, args []any) (any, error) {
		p, _ := args[0].(string)
		seen = append(seen, method+" "+p)
		if p == "fail" {
			return nil, errors.New("the model is down: é")
		}
		if a, ok := answers[p]; ok {
			return a, nil
		}
		return "echo " + p, nil
	}})
	out := run(t, in, `
def ask(f, p):
    try:
        return f(p)
    except BridgeError as e:
        return ("BridgeError", str(e))
for p in ["plain", "empty", "unicode", "long", "bad", "int", "list", "chan", "fail", "", "\ud800x", "x" * 100000]:
    a, b = ask(llm_query, p), ask(lambda p: llm_query_batched([p])[0], p)
    print(type(a).__name__, a == b and type(a) is type(b), repr(a)[:60])
`)
	// The type, whether both paths agree, and the repr of the answer (at
	// most 60 characters, as printed).
	want := []struct{ typ, repr string }{
		{"str", "'answer'"},
		{"str", "''"},
		{"str", "'é☃😀'"},
		{"str", "'" + long + "'"},
		{"str", "'a\uFFFDb'"}, // bytes that are not UTF-8 become U+FFFD
		{"int", "42"},
		{"list", "[1, 'x']"},
		{"tuple", `('BridgeError', "the host's answer cannot be converted to Python`},
		{"tuple", "('BridgeError', 'the model is down: é')"},
		{"str", "'echo '"},
		{"str", "'echo \uFFFDx'"},
		{"str", "'echo " + strings.Repeat("x", 100000) + "'"},
	}
	var wantOut strings.Builder
	for _, w := range want {
		r := []rune(w.repr)
		fmt.Fprintf(&wantOut, "%s True %s\n", w.typ, string(r[:min(len(r), 60)]))
	}
	if out != wantOut.String() {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, wantOut.String())
	}
	if len(seen) != 24 {
		t.Fatalf("host saw %d calls, want 24", len(seen))
	}
	for i := 0; i < len(seen); i += 2 {
		if seen[i] != seen[i+1] {
			t.Errorf("call %d: llm_query sent %q, llm_query_batched %q", i/2, seen[i], seen[i+1])
		}
	}
	if seen[20] != "llm_query \xed\xa0\x80x" {
		t.Errorf("a lone surrogate reached the host as %q, want its surrogatepass bytes", seen[20])
	}
}

func TestBridgeNone(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	out := run(t, in, `
try:
    llm_query("x")
except BridgeError as e:
    print(e)
`)
	if !strings.Contains(out, "llm_query") || !strings.Contains(out, "no bridge") {
		t.Errorf("stdout %q", out)
	}
}

func TestHelpersRestored(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	if err := in.SetContext(context.Background(), "alpha beta ALPHA"); err != nil {
		t.Fatal(err)
	}
	run(t, in, "chunk_text = None\nsearch_context = 5\ncontext = 'rebound'")
	out := run(t, in, "print(len(chunk_text('abcdef', 4, 1)), len(search_context('alpha')), context)")
	if out != "2 2 rebound\n" {
		t.Errorf("stdout %q", out)
	}
}

func TestExecInteractive(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	var out strings.Builder
	res, err := in.ExecInteractive(context.Background(), "x = 6\nx * 7", runtime.Output{Stdout: &out})
	if err != nil || res.Error != nil {
		t.Fatal(err, res.Error)
	}
	if out.String() != "42\n" {
		t.Errorf("stdout %q", out.String())
	}
	for src, want := range map[string]bool{"x = 1": true, "if x:": false, "if x:\n    y = 1": false, "if x:\n    y = 1\n": true, "(1,": false, "1 +* 2": true} {
		got, err := in.IsComplete(context.Background(), src)
		if err != nil || got != want {
			t.Errorf("IsComplete(%q) = %v, %v; want %v", src, got, err, want)
		}
	}
}

func TestLargeContext(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	text := strings.Repeat("abcdefghij", 10<<20) + "END" // 100 MB
	if err := in.SetContext(context.Background(), text); err != nil {
		t.Fatal(err)
	}
	out := run(t, in, "import rlm\nprint(len(context), context[-3:], context is rlm._rlm.context())")
	if out != fmt.Sprintf("%d END True\n", len(text)) {
		t.Errorf("stdout %q", out)
	}
}

// TestLargeTextEachWidth: large strings of each str width (ASCII,
// Latin-1, BMP, astral) reach Python exactly, as the context and as a
// variable; text that is not valid UTF-8 is decoded as Python decodes it.
func TestLargeTextEachWidth(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	ctx := context.Background()
	for _, tc := range []struct{ name, unit string }{
		{"ascii", "plain text, "},
		{"latin1", "café crème, "},
		{"bmp", "日本語のテキスト, "},
		{"astral", "emoji 🐍 and 𝄞, "},
		{"invalid", "bad \xff\xfe byte \xc3, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Repeat(tc.unit, (200<<10)/len(tc.unit)) + "END"
			if err := in.SetContext(ctx, text); err != nil {
				t.Fatal(err)
			}
			if err := in.Set(ctx, "big", text); err != nil {
				t.Fatal(err)
			}
			if err := in.Set(ctx, "raw", []byte(text)); err != nil {
				t.Fatal(err)
			}
			out := run(t, in, `want = raw.decode("utf-8", "replace")
import rlm
print(context == want, big == want, context is rlm._rlm.context(), len(search_context("END")))`)
			if out != "True True True 1\n" {
				t.Errorf("stdout %q", out)
			}
		})
	}
}

// TestLargeContextGuestMemory: a large ASCII context costs the guest about
// its size, not the size of its bytes and its str together.
func TestLargeContextGuestMemory(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	before := in.MemorySize()
	const size = 64 << 20
	if err := in.SetContext(context.Background(), strings.Repeat("x", size)); err != nil {
		t.Fatal(err)
	}
	if grown := in.MemorySize() - before; grown > size+size/4 {
		t.Errorf("guest memory grew by %d MiB for a %d MiB context", grown>>20, size>>20)
	}
	if out := run(t, in, "print(len(context), context.count('x'))"); out != fmt.Sprintf("%d %d\n", size, size) {
		t.Errorf("stdout %q", out)
	}
}

// TestTracebackShowsEarlierCells: a traceback through code defined in an
// earlier execution shows that cell's source lines, also after many
// executions.
func TestTracebackShowsEarlierCells(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	run(t, in, "def boom():\n    raise ValueError('from the first cell')")
	for range 50 {
		run(t, in, "x = 1")
	}
	res, err := in.Exec(context.Background(), "try:\n    boom()\nexcept ValueError as e:\n    raise KeyError('k') from e", runtime.Output{})
	if err != nil {
		t.Fatal(err)
	}
	tb := res.Error.Traceback
	for _, want := range []string{"raise ValueError('from the first cell')", "boom()", "raise KeyError('k') from e", `File "<cell-1>"`} {
		if !strings.Contains(tb, want) {
			t.Errorf("traceback lacks %q:\n%s", want, tb)
		}
	}
}

// TestRequestSizes: the guest takes a short request in one read and reads
// the rest of a longer one (boot.py's recv); requests of every size
// around the first read's 64 KiB, and far past it, arrive whole.
func TestRequestSizes(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	ctx := context.Background()
	for n := 65480; n <= 65560; n++ {
		code := fmt.Sprintf("s = %q\nprint(len(s), s[-3:])", strings.Repeat("a", n-3)+"end")
		if out := run(t, in, code); out != fmt.Sprintf("%d end\n", n) {
			t.Fatalf("source of %d bytes: stdout %q", len(code), out)
		}
	}
	list := make([]any, 100000)
	for i := range list {
		list[i] = int64(i)
	}
	if err := in.Set(ctx, "nums", list); err != nil {
		t.Fatal(err)
	}
	if out := run(t, in, "print(len(nums), sum(nums))"); out != "100000 4999950000\n" {
		t.Errorf("stdout %q", out)
	}
}

// TestChannelSurvivesRebinding: code that rebinds the builtins, os and
// marshal functions the bootstrap and llm_query use breaks neither the
// next request nor llm_query.
func TestChannelSurvivesRebinding(t *testing.T) {
	in := newInterp(t, runtime.Config{Bridge: func(_ context.Context, _ string, args []any) (any, error) {
		return fmt.Sprint("re: ", args[0]), nil
	}})
	run(t, in, `import os, marshal
def broken(*a, **k):
    raise RuntimeError("rebound")
for f in ("read", "write", "readv"):
    setattr(os, f, broken)
marshal.loads = marshal.dumps = broken
import builtins
for f in ("len", "memoryview", "int", "bytearray", "isinstance", "type", "compile", "exec"):
    setattr(builtins, f, broken)`)
	if err := in.Set(context.Background(), "v", []any{int64(1), "two"}); err != nil {
		t.Fatal(err)
	}
	out := run(t, in, "print(v, llm_query('ping'), llm_query_batched(['a', 'b']))")
	if out != "[1, 'two'] re: ping ['re: a', 're: b']\n" {
		t.Errorf("stdout %q", out)
	}
}

// storeOnly is an InterruptSource that cannot wake a waiter (the
// interpreter then looks at it every millisecond while a call is out).
type storeOnly struct{ a runtime.AtomicInterrupt }

func (s *storeOnly) Swap(v int32) int32 { return s.a.Swap(v) }
func (s *storeOnly) Load() int32        { return s.a.Load() }

// TestBridgeInterrupted: an interrupt that comes while a bridge call is
// out raises KeyboardInterrupt at once, whether the callback returns when
// its context is cancelled or not at all, with an InterruptSource that can
// wake a waiter and with one that cannot; the calls after it are answered.
func TestBridgeInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		waker    bool
		stubborn bool
	}{
		{"waker", true, false},
		{"waker/stubborn", true, true},
		{"polled", false, false},
		{"polled/stubborn", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var store func(int32)
			cfg := runtime.Config{}
			if tc.waker {
				a := &runtime.AtomicInterrupt{}
				cfg.Interrupt, store = a, a.Store
			} else {
				s := &storeOnly{}
				cfg.Interrupt, store = s, func(v int32) { s.a.Store(v) }
			}
			release := make(chan struct{})
			defer close(release)
			cancelled := make(chan struct{}, 1)
			cfg.Bridge = func(ctx context.Context, _ string, args []any) (any, error) {
				if args[0] != "block" {
					return args[0], nil
				}
				store(runtime.SIGINT)
				if tc.stubborn {
					<-release
				} else {
					<-ctx.Done()
					cancelled <- struct{}{}
				}
				return "late", nil
			}
			in := newInterp(t, cfg)
			out := run(t, in, `
print(llm_query("a"), llm_query("b"))
try:
    llm_query("block")
except KeyboardInterrupt:
    print("interrupted")
print(llm_query("c"), llm_query_batched(["d", "e"]))
`)
			if want := "a b\ninterrupted\nc ['d', 'e']\n"; out != want {
				t.Errorf("stdout %q, want %q", out, want)
			}
			if !tc.stubborn {
				<-cancelled // the callback's context was cancelled
			}
		})
	}
}

// TestBridgeBatchReplies: a batch whose calls are all answered comes back
// as its values (runtime/bridge.go's reply (3, values)); one with a failed
// call, or an answer that cannot be converted, takes the per-call form,
// with the failures in place; a prompt that is not a str fails before any
// call reaches the host.
func TestBridgeBatchReplies(t *testing.T) {
	var calls int
	var mu sync.Mutex
	in := newInterp(t, runtime.Config{Bridge: func(_ context.Context, method string, args []any) (any, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		p, _ := args[0].(string)
		switch p {
		case "int":
			return int64(7), nil
		case "list":
			return []any{"a", int64(1)}, nil
		case "chan":
			return make(chan int), nil
		case "fail":
			return nil, errors.New("no model")
		}
		return method + ":" + p, nil
	}})
	out := run(t, in, `
print(llm_query_batched(["a", "int", "list", "b"]))
print(rlm_query_batched(["t", ("u", [1])]))
r = llm_query_batched(["a", "chan", "fail", "b"], return_exceptions=True)
print(r[0], r[3], [(type(e).__name__, e.index) for e in r[1:3]])
try:
    llm_query_batched(["a", 3])
except TypeError as e:
    print("TypeError", e)
for f, arg in ((llm_query_batched, "abc"), (rlm_query_batched, b"abc")):
    try:
        f(arg)
    except TypeError as e:
        print("TypeError", e)
`)
	want := "['llm_query:a', 7, ['a', 1], 'llm_query:b']\n" +
		"['rlm_query:t', 'rlm_query:u']\n" +
		"llm_query:a llm_query:b [('BridgeError', 1), ('BridgeError', 2)]\n" +
		"TypeError llm_query_batched() prompts must be str, not int\n" +
		"TypeError llm_query_batched() prompts must be a list of str, not str (for one, call llm_query(prompt))\n" +
		"TypeError rlm_query_batched() tasks must be a list of str, not bytes (for one, call rlm_query(task, ctx))\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if calls != 10 {
		t.Errorf("the host answered %d calls, want 10", calls)
	}
}

// TestBridgeInterruptedRunnersEnd: when the interrupt and the answer come
// together, the goroutine that ran the call ends with the call, whichever
// the interpreter saw first; none stays behind until Close.
func TestBridgeInterruptedRunnersEnd(t *testing.T) {
	a := &runtime.AtomicInterrupt{}
	in := newInterp(t, runtime.Config{Interrupt: a, Bridge: func(context.Context, string, []any) (any, error) {
		a.Store(runtime.SIGINT)
		return "late", nil
	}})
	run(t, in, "pass")
	before := goruntime.NumGoroutine()
	out := run(t, in, `
n = 0
for _ in range(200):
    try:
        llm_query("x")
    except KeyboardInterrupt:
        n += 1
print(n)
`)
	if out != "200\n" {
		t.Fatalf("stdout %q, want 200 interrupted calls", out)
	}
	// The last runner may still be on its way out: wait for the count to
	// settle, within a bound.
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before the calls, %d after", before, goruntime.NumGoroutine())
		}
		goruntime.Gosched()
	}
}

// TestStreamsFlushedAtTheEnd: an execution's partial line reaches the host
// when it ends, whether the streams are the host's own (which write
// through), reconfigured to buffer, or replaced by code (boot.py's flush).
func TestStreamsFlushedAtTheEnd(t *testing.T) {
	in := newInterp(t, runtime.Config{})
	for _, tc := range []struct{ name, code, want string }{
		{"own", "print('a', end='')", "a"},
		{"reconfigured", "import sys\nsys.stdout.reconfigure(write_through=False)\nprint('b', end='')", "b"},
		{"restored", "import sys\nsys.stdout.reconfigure(write_through=True)\nprint('d', end='')", "d"},
		// Last: the wrapper closes the host's stream when it goes.
		{"replaced", "import sys, io\nsys.stdout = io.TextIOWrapper(sys.stdout.buffer, write_through=False)\nprint('c', end='')", "c"},
	} {
		if out := run(t, in, tc.code); out != tc.want {
			t.Errorf("%s: stdout %q, want %q", tc.name, out, tc.want)
		}
	}
}
