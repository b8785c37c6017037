package tests

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// TestGuestOutOfBoundsStopped: a guest load outside its linear memory is
// stopped in every build mode. tests/internal/oobprobe, built with the
// patched wazero like the binaries, runs a test module through the guest's
// engine configuration and memory: with bounds checks (as in direct mode
// and library builds) the access is a trap error; without (as in a worker)
// it faults and kills that process, and only that process: a worker
// sandbox started before keeps its state. Accesses inside the memory work
// in both.
func TestGuestOutOfBoundsStopped(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "oobprobe")
	build := osexec.Command("go", "build", "-tags", "rlm_testhooks", "-modfile", "build/go.patched.mod", "-o", probe, "./tests/internal/oobprobe")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build oobprobe (run `make build` first): %v\n%s", err, out)
	}

	sb := newSandbox(t, workerMode, supervisor.Config{}, "ctx")
	exec(t, sb, "x = 41")

	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, runtime.BoundsChecksEnv+"=") {
			env = append(env, kv)
		}
	}
	for _, tc := range []struct {
		drop bool
		fn   string
		addr string
		want string // "ok", "trap" or "fault"
	}{
		{false, "load", "0", "ok"},
		{false, "load", "0x10000", "trap"},
		{false, "far", "0xffffffff", "trap"},
		{true, "load", "0", "ok"},
		{true, "load", "0xfffc", "ok"},
		{true, "load", "0xfffd", "fault"},
		{true, "load", "0x10000", "fault"},
		{true, "load", "0xffffffff", "fault"},
		{true, "far", "0xffffffff", "fault"},
	} {
		args := []string{tc.fn, tc.addr}
		if tc.drop {
			args = append([]string{"-drop"}, args...)
		}
		cmd := osexec.Command(probe, args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		got := strings.TrimSpace(string(out))
		switch tc.want {
		case "ok":
			if err != nil || got != "ok" {
				t.Errorf("%v: %q, %v\n%s", args, got, err, stderr.String())
			}
		case "trap":
			if err != nil || !strings.HasPrefix(got, "trap:") || !strings.Contains(got, "out of bounds memory access") {
				t.Errorf("%v: %q, %v, want a trap\n%s", args, got, err, stderr.String())
			}
		case "fault":
			if err == nil || !strings.Contains(stderr.String(), "SIGSEGV") {
				t.Errorf("%v: %q, %v, want the process killed by a fault\n%s", args, got, err, stderr.String())
			}
		}
	}

	if r := exec(t, sb, "print(x + 1)"); strings.TrimSpace(r.Stdout) != "42" {
		t.Errorf("the worker sandbox after the probes: %+v", r)
	}
}

// TestWorkerRunsWithoutBoundsChecks: workers compile the guest without
// bounds checks and with small functions inlined (the runtime's "compiled"
// marker of that mode exists once a worker has started), direct mode with
// bounds checks, and both run the same code to the same result.
func TestWorkerRunsWithoutBoundsChecks(t *testing.T) {
	if os.Getenv(runtime.BoundsChecksEnv) == "1" {
		t.Skip(runtime.BoundsChecksEnv + "=1 keeps the checks")
	}
	code := "import re\nprint(len(re.findall(r'\\w+', context.lower())), context.split()[-1])"
	value := strings.Repeat("Alpha beta-12 GAMMA ", 5000) + "end"
	var outs []string
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, value)
		outs = append(outs, exec(t, sb, code).Stdout)
	})
	if len(outs) != 2 || outs[0] != outs[1] || outs[0] != "20001 end\n" {
		t.Errorf("worker and direct: %q", outs)
	}
	// The worker's mode, as the binaries compile it: also inlined (wazero
	// patch 28) unless RLM_SANDBOX_INLINING=0.
	suffix := "-nobounds-inline"
	if os.Getenv(runtime.InliningEnv) == "0" {
		suffix = "-nobounds"
	}
	marks, _ := filepath.Glob(filepath.Join(runtime.CacheDir(), "wazero", "*"+suffix, "compiled"))
	if len(marks) == 0 {
		t.Errorf("no *%s/compiled marker in %s: the worker did not compile without bounds checks and with inlining", suffix, filepath.Join(runtime.CacheDir(), "wazero"))
	}
}
