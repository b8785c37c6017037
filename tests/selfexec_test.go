package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// The self re-exec mechanism, from outside the module: testdata/selfexec
// is a program in a module of its own that requires this one through a
// replace to the checkout, built with `go build` and run with no rlm-worker
// to be found. The package documentation of supervisor says what it shows.

// selfExecReport is what testdata/selfexec prints.
type selfExecReport struct {
	PID             int
	Info            supervisor.Info
	WorkerPPID      int
	WorkerArgv0     string
	CancelErr       string
	Canceled        bool
	CancelErrorType string
	AfterCancel     string
	AlivePID        int
	Reaped          bool
	StartNS         []int64
	Error           string
}

// buildSelfExec builds testdata/selfexec into a temporary module and
// returns the binary. tags are go build's -tags; patched builds it with the
// wazero that `make build` patches, as the binaries are.
func buildSelfExec(t testing.TB, tags string, patched bool) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := osexec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the program with: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(mod)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/selfexec")); err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf(`module example.com/selfexec

%s

require (
	github.com/rlm-sandbox/rlm-sandbox v0.0.0
	zz.example/late v0.0.0
)

replace github.com/rlm-sandbox/rlm-sandbox => %s

replace zz.example/late => ./late
`, goLine, root)
	if patched {
		pmod, err := os.ReadFile(filepath.Join(root, "build/go.patched.mod"))
		if err != nil {
			t.Skipf("no patched wazero (run make): %v", err)
		}
		m := regexp.MustCompile(`(?m)^replace github.com/tetratelabs/wazero => \./(\S+)$`).FindSubmatch(pmod)
		if m == nil {
			t.Fatalf("build/go.patched.mod replaces no wazero")
		}
		gomod += "\nreplace github.com/tetratelabs/wazero => " + filepath.Join(root, string(m[1])) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checkout's sums cover every module the program needs; -mod=mod
	// adds their requirements to the program's go.mod.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "selfexec")
	args := []string{"build", "-mod=mod", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := osexec.Command(goBin, append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runSelfExec runs the program with an empty $PATH directory, no
// $RLM_WORKER and no rlm-worker next to it, plus env; it returns the
// report, the lines its package initialisers wrote and its stderr.
func runSelfExec(t testing.TB, bin string, env []string, args ...string) (selfExecReport, []string, string) {
	t.Helper()
	dir := t.TempDir()
	initLog := filepath.Join(dir, "init.log")
	cmd := osexec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "RLM_WORKER" && k != "PATH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+dir, "SELFEXEC_INIT_LOG="+initLog)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", bin, err, stderr.String())
	}
	var r selfExecReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("report %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	if r.Error != "" {
		t.Fatalf("the program failed: %s\nstderr:\n%s", r.Error, stderr.String())
	}
	b, err := os.ReadFile(initLog)
	if err != nil {
		t.Fatal(err)
	}
	return r, strings.Split(strings.TrimSpace(string(b)), "\n"), stderr.String()
}

// initsIn lists which of the program's initialisers ran in process pid, as
// the argv[0] it had, sorted.
func initsIn(lines []string, pid int) []string {
	var names []string
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == fmt.Sprint(pid) {
			names = append(names, f[0]+" as "+f[2])
		}
	}
	sort.Strings(names)
	return names
}

// checkWorker checks the report of a program whose sandbox ran in its own
// re-executed worker.
func checkWorker(t *testing.T, r selfExecReport) {
	t.Helper()
	if !r.Info.Worker || !strings.Contains(r.Info.Reason, "self re-exec") {
		t.Fatalf("info %+v: want a worker started by self re-exec", r.Info)
	}
	if r.Info.PID <= 0 || r.Info.PID == r.PID || r.WorkerPPID != r.PID {
		t.Fatalf("worker pid %d with parent %d; the program's pid is %d", r.Info.PID, r.WorkerPPID, r.PID)
	}
	if r.WorkerArgv0 != "rlm-worker" {
		t.Fatalf("worker argv[0] %q, want rlm-worker", r.WorkerArgv0)
	}
	if !r.Canceled || r.CancelErrorType != "KeyboardInterrupt" {
		t.Fatalf("Cancel of an endless loop: err %s, error type %q", r.CancelErr, r.CancelErrorType)
	}
	if r.AfterCancel != "42\n" || r.AlivePID != r.Info.PID {
		t.Fatalf("after the cancel: output %q from pid %d (worker %d)", r.AfterCancel, r.AlivePID, r.Info.PID)
	}
	if !r.Reaped {
		t.Fatalf("worker %d still in /proc after Destroy", r.Info.PID)
	}
}

func TestSelfExecWorker(t *testing.T) {
	bin := buildSelfExec(t, "", false)
	r, inits, _ := runSelfExec(t, bin, nil)
	checkWorker(t, r)
	// Every initialiser runs in the program; in the worker only those Go
	// runs before the supervisor package's: here early's, whose path sorts
	// first, not late's, nor main's, which imports supervisor.
	if got, want := initsIn(inits, r.PID), []string{"early as selfexec", "late as selfexec", "main as selfexec"}; !slices.Equal(got, want) {
		t.Errorf("initialisers run in the program: %q, want %q (log %q)", got, want, inits)
	}
	if got, want := initsIn(inits, r.Info.PID), []string{"early as rlm-worker"}; !slices.Equal(got, want) {
		t.Errorf("initialisers run in the worker: %q, want %q (log %q)", got, want, inits)
	}
	if len(inits) != 4 {
		t.Errorf("init log %q: want 3 lines from the program, 1 from the worker", inits)
	}
}

// This test binary, which imports the supervisor too, becomes its own
// worker the same way; Config.NoSelfExec turns that off.
func TestSelfExecOptOut(t *testing.T) {
	t.Setenv("RLM_WORKER", "")
	t.Setenv("PATH", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Run("self", func(t *testing.T) {
		sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, StartTimeout: 10 * time.Minute,
			MemoryLimit: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy()
		if info := sb.Info(); !info.Worker || info.PID == os.Getpid() || !strings.Contains(info.Reason, "self re-exec") {
			t.Fatalf("info %+v", info)
		}
		if err := sb.Initialize(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(context * 3)"); ce.Stdout != "xxx\n" {
			t.Fatalf("%+v", ce)
		}
		// The worker gets rlm-worker's flags, so the same limits.
		if ce := exec(t, sb, "x = bytearray(512 * 1024 * 1024)"); ce.ErrorType != "MemoryError" {
			t.Fatalf("512 MB under a 256 MB limit: %+v", ce)
		}
	})
	t.Run("NoSelfExec", func(t *testing.T) {
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, NoSelfExec: true})
		if !errors.Is(err, supervisor.ErrWorkerUnavailable) || !strings.Contains(err.Error(), "no rlm-worker binary") {
			t.Fatalf("err = %v, want ErrWorkerUnavailable for want of an rlm-worker binary", err)
		}
	})
	t.Run("WorkerPath", func(t *testing.T) {
		_, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, WorkerPath: "/nonexistent/rlm-worker"})
		if !errors.Is(err, supervisor.ErrWorkerUnavailable) {
			t.Fatalf("err = %v, want ErrWorkerUnavailable: an explicit WorkerPath is the only worker tried", err)
		}
	})
}

// Built with rlmsandbox_noinithook, the program becomes a worker only
// where it calls supervisor.ServeWorkerIfChild, and is never started as
// one unless it does.
func TestSelfExecExplicitEntryPoint(t *testing.T) {
	bin := buildSelfExec(t, "rlmsandbox_noinithook", false)
	t.Run("called", func(t *testing.T) {
		r, inits, _ := runSelfExec(t, bin, []string{"SELFEXEC_CALL=1"})
		checkWorker(t, r)
		want := []string{"early as rlm-worker", "late as rlm-worker", "main as rlm-worker"}
		if got := initsIn(inits, r.Info.PID); !slices.Equal(got, want) {
			t.Errorf("initialisers run in the worker: %q, want %q (log %q)", got, want, inits)
		}
	})
	t.Run("not called", func(t *testing.T) {
		r, _, stderr := runSelfExec(t, bin, nil)
		if r.Info.Worker || !strings.Contains(r.Info.Reason, "ServeWorkerIfChild not called") {
			t.Fatalf("info %+v: want direct mode, for want of the call", r.Info)
		}
		// WorkerAuto's fall-back is logged at warning level.
		if !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, "running in-process") {
			t.Fatalf("no warning of the fall-back to direct mode on stderr:\n%s", stderr)
		}
	})
}

// BenchmarkSelfExecNewReady compares starting a sandbox (New to a sandbox
// that has answered Initialize) whose worker is the program itself with
// one whose worker is bin/rlm-worker, from the same program. Built with
// plain go build, the program has stock wazero, so its own worker keeps
// the bounds checks and the slower native-code load that bin/rlm-worker's
// patched wazero removes; self-patched is the program built with the
// patched wazero too, which isolates the cost of the re-exec itself.
func BenchmarkSelfExecNewReady(b *testing.B) {
	rlmWorker, err := filepath.Abs("../bin/rlm-worker")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		patched bool
		env     []string
	}{
		{"self", false, nil},
		{"self-patched", true, nil},
		{"rlm-worker", false, []string{"RLM_WORKER=" + rlmWorker}},
	} {
		b.Run(c.name, func(b *testing.B) {
			bin := buildSelfExec(b, "", c.patched)
			b.ResetTimer()
			r, _, _ := runSelfExec(b, bin, c.env, "-runs", fmt.Sprint(b.N))
			if self := strings.Contains(r.Info.Reason, "self re-exec"); !r.Info.Worker || self == (c.name == "rlm-worker") {
				b.Fatalf("info %+v", r.Info)
			}
			var total time.Duration
			ns := slices.Clone(r.StartNS)
			for _, d := range ns {
				total += time.Duration(d)
			}
			slices.Sort(ns)
			b.ReportMetric(float64(total.Nanoseconds())/float64(len(ns)), "ns/start")
			b.ReportMetric(float64(ns[len(ns)/2])/1e6, "ms-median")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// The rlm-sandbox command's worker is the rlm-worker next to it (or on
// $PATH); with none to be found, as after a `go install` of the command
// alone, it is rlm-sandbox itself, re-executed, locked down as rlm-worker
// would be: never the interpreter in-process, which no lock-down covers.
func TestCLIWorker(t *testing.T) {
	copyBin := func(t *testing.T, dir, name string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("../bin", name))
		if err != nil {
			t.Fatalf("%v (run `make` first)", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, dir string) (stdout, stderr string) {
		t.Helper()
		cmd := osexec.Command(filepath.Join(dir, "rlm-sandbox"), "exec", "--verbose")
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != "RLM_WORKER" && k != "PATH" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PATH="+t.TempDir())
		cmd.Stdin = strings.NewReader("print(6 * 7)\n")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.WaitDelay = 10 * time.Second
		if err := cmd.Run(); err != nil {
			t.Fatalf("rlm-sandbox exec: %v\nstderr:\n%s", err, errb.String())
		}
		if out.String() != "42\n" {
			t.Fatalf("stdout %q, want 42\nstderr:\n%s", out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	t.Run("next to it", func(t *testing.T) {
		dir := t.TempDir()
		copyBin(t, dir, "rlm-sandbox")
		copyBin(t, dir, "rlm-worker")
		_, stderr := run(t, dir)
		want := "mode=worker path=" + filepath.Join(dir, "rlm-worker") + " self_exec=false"
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr does not say %q:\n%s", want, stderr)
		}
	})
	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		copyBin(t, dir, "rlm-sandbox")
		_, stderr := run(t, dir)
		if !strings.Contains(stderr, "mode=worker") || !strings.Contains(stderr, "self_exec=true") ||
			strings.Contains(stderr, "running in-process") {
			t.Fatalf("want rlm-sandbox itself as the worker; stderr:\n%s", stderr)
		}
	})
}
