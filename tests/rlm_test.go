package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

func TestChunkText(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce := exec(t, sb, `
print(chunk_text("abcdefghij", 4, 1))
print(chunk_text("abcdefghij", 5, 0))
print(chunk_text("abc", 10, 2), chunk_text("", 3, 1))
print(chunk_text("abcdefghijklmnopqrstuvwxyz", 10), chunk_text("", 5), len(chunk_text("x" * 2000, 1000)))
big = "x" * 25000
c = chunk_text(big)
print(len(c), [len(p) for p in c], c[0][-500:] == c[1][:500])
for args in [(0, 0), (-1, 0), (5, 5), (5, 7), (5, -1)]:
    try:
        chunk_text("abc", *args)
        print("accepted", args)
    except ValueError as e:
        print("ValueError:", e)
try:
    chunk_text(42)
except TypeError as e:
    print("TypeError:", e)
print(chunk_text.__doc__.split(".")[0])
`)
		want := `['abcd', 'defg', 'ghij']
['abcde', 'fghij']
['abc'] []
['abcdefghij', 'jklmnopqrs', 'stuvwxyz'] [] 3
3 [10000, 10000, 6000] True
ValueError: chunk_text() size must be positive, got 0
ValueError: chunk_text() size must be positive, got -1
ValueError: chunk_text() overlap (5) must be smaller than size (5)
ValueError: chunk_text() overlap (7) must be smaller than size (5)
ValueError: chunk_text() overlap must not be negative, got -1
TypeError: chunk_text() text must be str, not int
Split text into chunks of at most size characters
`
		if ce.Stdout != want || ce.Error != "" {
			t.Fatalf("stdout:\n%s\nwant:\n%s\n%s", ce.Stdout, want, ce.Traceback)
		}
	})
}

func TestSearchContext(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		doc := "Alice met Bob. Later, ALICE wrote to bob. " + strings.Repeat("filler ", 100) + "alice again."
		sb := newSandbox(t, m, supervisor.Config{Timeout: 2 * time.Second}, doc)
		ce := exec(t, sb, `
r = search_context("alice", window=4)
print(len(r), sorted(r[0]), r[0])
print([x["match"] for x in r], r[1]["context"])
print(len(search_context("bob|alice", max_results=3)), search_context("nomatch"))
print(search_context(r"b(o)b")[0]["match"], len(search_context("filler", 0, 1000)))
context = "rebound"
print(len(search_context("alice")))
for bad in ["a" * 1001, "("]:
    try:
        search_context(bad)
    except Exception as e:
        print(type(e).__name__, str(e)[:60])
`)
		want := "3 ['context', 'end', 'match', 'start'] {'match': 'Alice', 'start': 0, 'end': 5, 'context': 'Alice met'}\n" +
			"['Alice', 'ALICE', 'alice'] er, ALICE wro\n" +
			"3 []\n" +
			"Bob 100\n" +
			"3\n" +
			"ValueError search_context() pattern is 1001 characters long; the limit \n" +
			"PatternError missing ), unterminated subpattern at position 0\n"
		if ce.Stdout != want || ce.Error != "" {
			t.Fatalf("stdout:\n%s\nwant:\n%s\n%s", ce.Stdout, want, ce.Traceback)
		}
		// A catastrophic pattern is stopped by the timeout; the sandbox
		// survives.
		if err := sb.Initialize(context.Background(), strings.Repeat("a", 40)+"!"); err != nil {
			t.Fatal(err)
		}
		ce, err := sb.Execute(context.Background(), "print('searching')\nsearch_context('(a+)+$')")
		if !errors.Is(err, supervisor.ErrTimeout) || ce.Stdout != "searching\n" || ce.ErrorType != "KeyboardInterrupt" {
			t.Fatalf("err %v, %+v", err, ce)
		}
		if ce := exec(t, sb, "print(len(context))"); ce.Stdout != "41\n" {
			t.Fatalf("after the timeout: %+v", ce)
		}
	})
}

func TestRebindingHelpers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: upper}, "the context")
		exec(t, sb, "llm_query = chunk_text = search_context = rlm_query = None\nBridgeError = int\ncontext = 'mine'\ndel llm_query_batched")
		ce := exec(t, sb, "print(llm_query('x'), chunk_text('abc', 2, 1), len(search_context('the')), issubclass(BridgeError, Exception), llm_query_batched(['y']), context)")
		if ce.Stdout != "X ['ab', 'bc'] 1 True ['Y'] mine\n" {
			t.Fatalf("%+v", ce)
		}
		// A new context from the caller replaces the rebound one.
		if err := sb.Initialize(context.Background(), "new"); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(context)"); ce.Stdout != "new\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

type doc struct {
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
}

func TestStructuredContext(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		value := map[string]any{
			"docs":  []doc{{"one", []string{"a"}}, {"two", nil}},
			"n":     3,
			"ratio": 0.5,
			"ok":    true,
			"none":  nil,
			"ids":   []int{1, 2},
		}
		sb := newSandbox(t, m, supervisor.Config{}, value)
		ce := exec(t, sb, `
print(type(context).__name__, sorted(context))
print(context["docs"][0] == {"title": "one", "tags": ["a"]}, context["docs"][1]["tags"], context["n"] + 1, context["ratio"], context["ok"], context["none"], context["ids"])
print(len(search_context('"title": "two"')))
`)
		want := "dict ['docs', 'ids', 'n', 'none', 'ok', 'ratio']\nTrue None 4 0.5 True None [1, 2]\n1\n"
		if ce.Stdout != want {
			t.Fatalf("stdout %q, want %q %s", ce.Stdout, want, ce.Traceback)
		}
		if err := sb.Initialize(context.Background(), []any{"x", 1.5, []string{"y"}}); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(context)"); ce.Stdout != "['x', 1.5, ['y']]\n" {
			t.Fatalf("%+v", ce)
		}
		if err := sb.Initialize(context.Background(), make(chan int)); err == nil || !strings.Contains(err.Error(), "chan int") {
			t.Fatalf("a channel as context: %v", err)
		}
	})
}

func TestLargeContext(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		text := strings.Repeat("0123456789abcdeé", 6<<20) + "THE END" // 100 MiB, not all ASCII
		if err := sb.Initialize(context.Background(), text); err != nil {
			t.Fatal(err)
		}
		ce := exec(t, sb, "print(len(context.encode()), context[-7:], context.count('é'))")
		if want := fmt.Sprintf("%d THE END %d\n", len(text), 6<<20); ce.Stdout != want {
			t.Fatalf("stdout %q, want %q", ce.Stdout, want)
		}
		// Large values other than strings cross too.
		big := make([]string, 2_000_000)
		for i := range big {
			big[i] = "item-" + fmt.Sprint(i)
		}
		if err := sb.SetVariable(context.Background(), "items", big); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(len(items), items[-1])"); ce.Stdout != "2000000 item-1999999\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

func TestStreamingOrder(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var mu sync.Mutex
		var events []string
		record := func(s string) {
			mu.Lock()
			events = append(events, s)
			mu.Unlock()
		}
		cfg := supervisor.Config{
			OnStdout: func(l string) { record("out:" + l) },
			OnStderr: func(l string) { record("err:" + l) },
			// The host sees the lines printed before the call while the
			// code is still running: output is streamed, not collected.
			OnLLMQuery: func(context.Context, string) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				return strings.Join(events, ","), nil
			},
		}
		sb := newSandbox(t, m, cfg, "")
		ce := exec(t, sb, "import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')\nseen = llm_query('?')\nprint('four', end='')")
		if got, _, _ := sb.GetVariable(context.Background(), "seen"); got != "out:one,err:two,out:three" {
			t.Errorf("lines seen during the execution: %v", got)
		}
		if want := []string{"out:one", "err:two", "out:three", "out:four"}; fmt.Sprint(events) != fmt.Sprint(want) {
			t.Errorf("events %q, want %q", events, want)
		}
		if ce.Stdout != "one\nthree\nfour" || ce.Stderr != "two\n" {
			t.Errorf("%+v", ce)
		}

		// Many writes to both streams, several batches of output in all,
		// arrive in the order they were written.
		mu.Lock()
		events = nil
		mu.Unlock()
		ce = exec(t, sb, `import sys
for i in range(300):
    print('o%d' % i)
    if i % 3 == 0:
        print('e%d' % i, file=sys.stderr)
    if i % 25 == 0:
        print('x' * 30000)`)
		var want []string
		for i := range 300 {
			want = append(want, fmt.Sprintf("out:o%d", i))
			if i%3 == 0 {
				want = append(want, fmt.Sprintf("err:e%d", i))
			}
			if i%25 == 0 {
				want = append(want, "out:"+strings.Repeat("x", 30000))
			}
		}
		mu.Lock()
		got := events
		mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("%d events, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
		}
		if ce.Error != "" || !ce.Truncated {
			t.Errorf("%+v", ce)
		}
	})
}

// firstDiff is the index of the first element where a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Output reaches the callbacks while the code runs, with nothing but time
// to push it: the code below ends only when the host, having seen both
// lines, cancels it.
func TestOutputIsLive(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var sb supervisor.Sandbox
		var mu sync.Mutex
		seen := map[string]bool{}
		see := func(l string) {
			mu.Lock()
			defer mu.Unlock()
			seen[l] = true
			if seen["to stdout"] && seen["to stderr"] {
				sb.Cancel()
			}
		}
		sb = newSandbox(t, m, supervisor.Config{OnStdout: see, OnStderr: see}, "")
		done := make(chan result, 1)
		go func() {
			ce, err := sb.Execute(context.Background(), "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nwhile True: pass")
			done <- result{ce, err}
		}()
		select {
		case r := <-done:
			if !errors.Is(r.err, supervisor.ErrCanceled) || r.ce.Stdout != "to stdout\n" || r.ce.Stderr != "to stderr\n" {
				t.Fatalf("%v %+v", r.err, r.ce)
			}
		case <-time.After(time.Minute):
			t.Fatal("the output did not reach the callbacks while the code ran")
		}
	})
}

func TestTruncation(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{MaxOutputLength: 100}, "")
		ce := exec(t, sb, "import sys\nprint('é' * 1000, end='')\nprint(''.join(str(i % 10) for i in range(1000)), end='', file=sys.stderr)")
		wantOut := strings.Repeat("é", 50) + "\n[... 900 characters omitted ...]\n" + strings.Repeat("é", 50)
		digits := ""
		for i := 950; i < 1000; i++ {
			digits += fmt.Sprint(i % 10)
		}
		wantErr := "01234567890123456789012345678901234567890123456789\n[... 900 characters omitted ...]\n" + digits
		if ce.Stdout != wantOut || ce.Stderr != wantErr || !ce.Truncated {
			t.Fatalf("stdout %q\nstderr %q\ntruncated %v", ce.Stdout, ce.Stderr, ce.Truncated)
		}
		ce = exec(t, sb, "print('x' * 99)")
		if ce.Stdout != strings.Repeat("x", 99)+"\n" || ce.Truncated {
			t.Fatalf("output of exactly the limit: %+v", ce)
		}
		// Output cut into batches and frames (one write of 1.8 MB, over
		// the 1 MiB frame cap, and many small ones) is counted to the
		// character, multibyte characters included.
		ce = exec(t, sb, "print('€' * 600000, end='')\nfor i in range(20000): print('é' * 9 + 'ü', end='')")
		wantOut = strings.Repeat("€", 50) + "\n[... 799900 characters omitted ...]\n" + strings.Repeat(strings.Repeat("é", 9)+"ü", 5)
		if ce.Stdout != wantOut || !ce.Truncated {
			t.Fatalf("large output: kept %q", ce.Stdout)
		}
	})
}

func TestDefaultOutputLimit(t *testing.T) {
	sb := newSandbox(t, directMode, supervisor.Config{}, "")
	ce := exec(t, sb, "print('y' * 60000, end='')")
	want := strings.Repeat("y", 25000) + "\n[... 10000 characters omitted ...]\n" + strings.Repeat("y", 25000)
	if ce.Stdout != want {
		t.Fatalf("got %d characters", len(ce.Stdout))
	}
}

func TestPrintBomb(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		lines := 0
		cfg := supervisor.Config{Timeout: 2 * time.Second, OnStdout: func(string) { lines++ }}
		sb := newSandbox(t, m, cfg, "")
		ce, err := sb.Execute(context.Background(), "print('start')\nwhile True:\n    print('x' * 100000)")
		if !errors.Is(err, supervisor.ErrTimeout) {
			t.Fatalf("err %v", err)
		}
		if !ce.Truncated || !strings.HasPrefix(ce.Stdout, "start\nxxx") || len(ce.Stdout) > supervisor.DefaultMaxOutputLength+100 {
			t.Fatalf("kept %d bytes, truncated %v", len(ce.Stdout), ce.Truncated)
		}
		var omitted int
		if _, err := fmt.Sscanf(ce.Stdout[25000:], "\n[... %d characters omitted ...]", &omitted); err != nil || omitted < 1_000_000 {
			t.Fatalf("notice: %v %d", err, omitted)
		}
		if lines < 10 {
			t.Fatalf("only %d lines streamed", lines)
		}
		if ce := exec(t, sb, "print('alive')"); ce.Stdout != "alive\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

func TestPartialOutput(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{Timeout: 3 * time.Second}, "")
		ce := exec(t, sb, "import sys\nprint('before')\nprint('warn', file=sys.stderr)\nraise ValueError('boom')")
		if ce.Stdout != "before\n" || ce.Stderr != "warn\n" || ce.ErrorType != "ValueError" {
			t.Fatalf("exception: %+v", ce)
		}
		ce, err := sb.Execute(context.Background(), "print('spinning')\nwhile True: pass")
		if !errors.Is(err, supervisor.ErrTimeout) || ce.Stdout != "spinning\n" {
			t.Fatalf("timeout: %v %+v", err, ce)
		}
	})
}

func TestInteractive(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ce, err := sb.ExecuteInteractive(context.Background(), "x = 6\nx * 7")
		if err != nil || ce.Stdout != "42\n" {
			t.Fatalf("%v %+v", err, ce)
		}
		ce, err = sb.ExecuteInteractive(context.Background(), "None")
		if err != nil || ce.Stdout != "" {
			t.Fatalf("%v %+v", err, ce)
		}
		if ce := exec(t, sb, "print(_)"); ce.Stdout != "42\n" {
			t.Fatalf("%+v", ce)
		}
		for src, want := range map[string]bool{"for i in range(3):": false, "for i in range(3):\n    print(i)\n": true, "x = (1,": false, "1 +* 2": true} {
			got, err := sb.IsComplete(context.Background(), src)
			if err != nil || got != want {
				t.Errorf("IsComplete(%q) = %v, %v; want %v", src, got, err, want)
			}
		}
		st, err := sb.Stats(context.Background())
		if err != nil || st.Executions != 3 || st.LinearMemoryBytes == 0 || st.Worker != (m.name == "worker") || st.Worker && st.RSSBytes == 0 {
			t.Fatalf("%v %+v", err, st)
		}
	})
}

// Stats answers while code runs (serve's stats method relies on it).
func TestStatsWhileRunning(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		w := newLineWaiter()
		sb := newSandbox(t, m, supervisor.Config{OnStdout: w.onLine}, "")
		done := make(chan error, 1)
		go func() {
			_, err := sb.Execute(context.Background(), "print('running')\nwhile True: pass")
			done <- err
		}()
		w.wait(t, "running")
		st, err := sb.Stats(context.Background())
		if err != nil || st.LinearMemoryBytes == 0 || st.Worker != (m.name == "worker") {
			t.Fatalf("%v %+v", err, st)
		}
		concurrentStats(t, sb)
		sb.Cancel()
		if err := <-done; !errors.Is(err, supervisor.ErrCanceled) {
			t.Fatalf("err %v", err)
		}
		concurrentStats(t, sb) // and while nothing runs
	})
}

// concurrentStats asks for Stats from several goroutines at once: each
// gets its answer (in worker mode, the callers take turns reading them).
func concurrentStats(t *testing.T, sb supervisor.Sandbox) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := sb.Stats(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
