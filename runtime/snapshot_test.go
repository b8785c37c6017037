package runtime

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// snapshotCache is a fresh cache directory that shares the machine's
// compiled code and bytecode-compiled stdlib, so that an interpreter
// starts in it without compiling anything, but with no boot snapshot.
func snapshotCache(t testing.TB) string {
	t.Helper()
	dir := testCache(t)
	shared := filepath.Join(CacheDir(), "stdlib")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no prepared stdlib in %s (run `make`)", shared)
	}
	if err := os.Symlink(shared, filepath.Join(dir, "stdlib")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func snapshotConfig(cache string, notice *strings.Builder) Config {
	return Config{Distribution: DefaultDistribution(), CacheDir: cache, Notice: notice}
}

// snapshotFiles lists the boot images in a cache directory, failing on
// any temporary file left behind.
func snapshotFiles(t *testing.T, cache string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(cache, "snapshot"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if img, ok := strings.CutSuffix(e.Name(), distload.SidecarSuffix); ok { // a mark (see trim.go)
			if _, err := os.Stat(filepath.Join(cache, "snapshot", img)); err != nil {
				t.Errorf("snapshot directory holds %s, the mark of a missing file", e.Name())
			}
			continue
		}
		if !strings.HasPrefix(e.Name(), "boot-") || !strings.HasSuffix(e.Name(), ".img") {
			t.Errorf("snapshot directory holds %s", e.Name())
		}
		names = append(names, filepath.Join(cache, "snapshot", e.Name()))
	}
	return names
}

func newSnapshotInterp(t *testing.T, cfg Config) *Interpreter {
	t.Helper()
	in, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

func run(t *testing.T, in *Interpreter, code string) string {
	t.Helper()
	var out strings.Builder
	res, err := in.Exec(context.Background(), code, Output{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("%s\n%s", res.Error.Traceback, out.String())
	}
	return out.String()
}

// TestSnapshotRestoresBootedInterpreter: the first interpreter on a cache
// boots and writes the snapshot; later ones start from it and behave the
// same, each with its own memory and randomness.
func TestSnapshotRestoresBootedInterpreter(t *testing.T) {
	cache := snapshotCache(t)
	var notice strings.Builder
	cfg := snapshotConfig(cache, &notice)
	first := newSnapshotInterp(t, cfg)
	if first.restored {
		t.Fatal("the first interpreter on an empty cache was restored")
	}
	if files := snapshotFiles(t, cache); len(files) != 1 {
		t.Fatalf("snapshot files %v after the first boot; notices: %s", files, notice.String())
	}
	a, b := newSnapshotInterp(t, cfg), newSnapshotInterp(t, cfg)
	if !a.restored || !b.restored {
		t.Fatalf("restored %v %v; notices: %s", a.restored, b.restored, notice.String())
	}
	if a.PythonVersion() != first.PythonVersion() {
		t.Errorf("version %q, booted %q", a.PythonVersion(), first.PythonVersion())
	}
	probe := `import os, sys
print(sorted(k for k in ("llm_query", "rlm_query", "chunk_text", "search_context", "BridgeError") if k in globals()))
print(os.getcwd(), os.listdir("/tmp"), "json" in sys.modules)
`
	if got, want := run(t, a, probe), run(t, first, probe); got != want {
		t.Errorf("restored interpreter sees\n%s\nbooted one\n%s", got, want)
	}
	// Memory is private: what one restored interpreter does, the other
	// does not see.
	run(t, a, "shared = 'a'\nopen('/tmp/f', 'w').write('a')")
	if got := run(t, b, "import os; print('shared' in globals(), os.path.exists('/tmp/f'))"); got != "False False\n" {
		t.Errorf("b sees a's state: %q", got)
	}
	// random is seeded per interpreter, not frozen in the image.
	ra := run(t, a, "import random; print(random.getrandbits(64))")
	rb := run(t, b, "import random; print(random.getrandbits(64))")
	if ra == rb {
		t.Errorf("two restored interpreters drew the same random number %s", ra)
	}
	// Exceptions and their tracebacks, interrupts, helpers: as booted.
	var out strings.Builder
	res, err := b.Exec(context.Background(), "def f():\n    return 1/0\nf()", Output{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Type != "ZeroDivisionError" ||
		!strings.Contains(res.Error.Traceback, `File "<cell-`) || strings.Contains(res.Error.Traceback, "_rlm") {
		t.Errorf("exception: %+v", res.Error)
	}
	started := &signalWriter{started: make(chan struct{})}
	go func() { <-started.started; b.Interrupt() }()
	res, err = b.Exec(context.Background(), "print('spinning')\nwhile True: pass", Output{Stdout: started})
	if err != nil {
		t.Errorf("interrupt: %v", err)
	} else if res.Error == nil || res.Error.Type != "KeyboardInterrupt" {
		t.Errorf("interrupt: %+v", res.Error)
	}
	if got := run(t, b, "print(chunk_text('abcdef', 4, 0))"); got != "['abcd', 'ef']\n" {
		t.Errorf("chunk_text: %q", got)
	}
	if strings.Contains(notice.String(), "snapshot") {
		t.Errorf("notices: %s", notice.String())
	}
}

// TestSnapshotSwitchedOff: NoSnapshot and RLM_SANDBOX_SNAPSHOT=0 boot every
// interpreter and write nothing.
func TestSnapshotSwitchedOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(Config) Config
		env  string
	}{
		{"config", func(c Config) Config { c.NoSnapshot = true; return c }, ""},
		{"env", func(c Config) Config { return c }, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(snapshotEnv, tc.env)
			}
			cache := snapshotCache(t)
			cfg := tc.cfg(snapshotConfig(cache, new(strings.Builder)))
			for range 2 {
				if in := newSnapshotInterp(t, cfg); in.restored {
					t.Error("restored with snapshots off")
				}
			}
			if files := snapshotFiles(t, cache); len(files) != 0 {
				t.Errorf("snapshots written: %v", files)
			}
		})
	}
}

// TestSnapshotBadFileRebuilt: a snapshot of another build, a truncated
// one and a corrupted one are each rejected with the reason on Notice; the
// interpreter boots, and the snapshot is written anew and used.
func TestSnapshotBadFileRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		reason string
	}{
		{"other build", func(b []byte) []byte {
			n := binary.LittleEndian.Uint32(b[8:12])
			i := 12 + strings.Index(string(b[12:12+n]), `"Key":"`) + len(`"Key":"`)
			b[i] = "01"[b[i]&1^1] // another key of the same length
			return b
		}, "made for another build"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-wasmPageSize] }, "truncated"},
		{"corrupt", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, "corrupt"},
		{"not a snapshot", func(b []byte) []byte { return []byte("hello") }, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := snapshotCache(t)
			var notice strings.Builder
			cfg := snapshotConfig(cache, &notice)
			newSnapshotInterp(t, cfg) // writes the snapshot
			files := snapshotFiles(t, cache)
			if len(files) != 1 {
				t.Fatalf("snapshot files %v", files)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(files[0], tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			in := newSnapshotInterp(t, cfg)
			if in.restored {
				t.Fatal("started from a damaged snapshot")
			}
			if !strings.Contains(notice.String(), tc.reason) {
				t.Errorf("notice %q does not say %q", notice.String(), tc.reason)
			}
			if got := run(t, in, "print(1 + 1)"); got != "2\n" {
				t.Errorf("booted interpreter printed %q", got)
			}
			if again := newSnapshotInterp(t, cfg); !again.restored {
				t.Errorf("the snapshot was not rebuilt; notices: %s", notice.String())
			}
			if files := snapshotFiles(t, cache); len(files) != 1 {
				t.Errorf("snapshot files %v", files)
			}
		})
	}
}

// helperProcesses runs n copies of this test binary at once, each running
// the test named with env added to its environment, and returns their
// outputs once all have ended (a failed one fails t). onLine, when set,
// sees each line of output as it comes.
func helperProcesses(t *testing.T, n int, test string, env []string, onLine func(string)) []string {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([]string, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out strings.Builder
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if onLine != nil {
					onLine(sc.Text())
				}
				out.WriteString(sc.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v\n%s%s", i, err, out.String(), stderr.String())
			}
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	return outs
}

// TestSnapshotHelperProcess is the child of TestSnapshotTwoProcesses.
func TestSnapshotHelperProcess(t *testing.T) {
	if os.Getenv("RLM_SNAPSHOT_HELPER") != "1" {
		t.Skip("helper process")
	}
	testHookSnapshotWritten = func() { fmt.Println("wrote the snapshot") }
	in := newSnapshotInterp(t, snapshotConfig(os.Getenv("RLM_SNAPSHOT_CACHE"), new(strings.Builder)))
	fmt.Print(run(t, in, "print('python', 6 * 7)"))
}

// TestSnapshotTwoProcesses: two processes starting at once on a cache
// without a snapshot write it once between them, and both run Python.
func TestSnapshotTwoProcesses(t *testing.T) {
	cache := snapshotCache(t)
	outs := helperProcesses(t, 2, "TestSnapshotHelperProcess", []string{"RLM_SNAPSHOT_HELPER=1", "RLM_SNAPSHOT_CACHE=" + cache}, nil)
	writers := 0
	for i, out := range outs {
		if !strings.Contains(out, "python 42") {
			t.Errorf("process %d did not run Python:\n%s", i, out)
		}
		writers += strings.Count(out, "wrote the snapshot")
	}
	if writers != 1 {
		t.Errorf("%d processes wrote the snapshot, want 1", writers)
	}
	if files := snapshotFiles(t, cache); len(files) != 1 {
		t.Errorf("snapshot files %v", files)
	}
}
