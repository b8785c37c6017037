package tests

import (
	"errors"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// Under a virtual memory limit too low for the 4 GiB reservation of the
// guest's memory (`ulimit -v`, as some hosts and containers set), a sandbox
// still runs, in a worker and in-process: its memory then lives on the Go
// heap. It used to crash the worker, or with --direct the command, with a
// nil pointer dereference in wazero.
func TestUnderAddressSpaceLimit(t *testing.T) {
	if _, err := osexec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for _, args := range [][]string{{"exec", "-c", "print(sum(range(10)))"}, {"exec", "--direct", "-c", "print(sum(range(10)))"}} {
		t.Run(strings.Join(args[:len(args)-2], " "), func(t *testing.T) {
			// 4,000,000 KiB: room for the Go runtime and the compiled
			// module, not for a 4 GiB reservation besides.
			cmd := osexec.Command("sh", append([]string{"-c", `ulimit -v 4000000 && exec "$0" "$@"`, cliBin(t)}, args...)...)
			cmd.Env = os.Environ()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || string(out) != "45\n" {
				t.Fatalf("under ulimit -v: %v, stdout %q, stderr %q", err, out, stderr.String())
			}
			if strings.Contains(stderr.String(), "in-process") {
				t.Errorf("the worker did not run: %s", stderr.String())
			}
		})
	}
}

// A cache another user filled (its compiled code private to them: a CI
// cache shared between users, a container run under another uid) does not
// stop a sandbox: the code is compiled again, in memory. It used to fail
// every sandbox with "permission denied" and a hint about downloading
// Pyodide.
func TestCacheOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run the command as another user")
	}
	// A tree the other user (nobody) can read: a copy of Pyodide's files
	// and a cache that root fills first.
	base, err := os.MkdirTemp("", "rlm-other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(base, "pyodide")
	if err := os.CopyFS(dist, os.DirFS(string(runtime.DefaultDistribution()))); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(dist, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(base, "cache")
	run := func(cred *syscall.Credential, code string) (string, string, error) {
		cmd := osexec.Command(cliBin(t), "exec", "--index-url", dist, "-c", code)
		cmd.Env = append(os.Environ(), "RLM_SANDBOX_CACHE="+cache, "HOME="+base)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if out, stderr, err := run(nil, "print(1)"); err != nil || out != "1\n" {
		t.Fatalf("as root: %v, %q, %q", err, out, stderr)
	}
	out, stderr, err := run(&syscall.Credential{Uid: 65534, Gid: 65534}, "print(2)")
	if err != nil || out != "2\n" {
		t.Fatalf("as nobody, with root's cache: %v, stdout %q, stderr %q", err, out, stderr)
	}
}

// A descriptor limit already below the worker's 64 is kept, and the
// rlimits layer reported applied: it was reported refused as a whole,
// since raising a hard limit is not allowed.
func TestLowDescriptorLimit(t *testing.T) {
	cmd := osexec.Command("sh", "-c", `ulimit -n 40 && exec "$0" version`, cliBin(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("version under ulimit -n 40: %v\n%s", err, out)
	}
	var hardening string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "hardening" {
			hardening = l
		}
	}
	if !strings.Contains(hardening, "rlimits") || strings.Contains(string(out), "rlimits:") {
		t.Fatalf("the rlimits layer is not reported applied:\n%s", out)
	}
}

// A file size limit under one page stops the worker's interrupt page (a
// file of one page): the command says so, and what to do (its hint said
// to build rlm-worker, which was there).
func TestLowFileSizeLimit(t *testing.T) {
	cmd := osexec.Command("bash", "-c", `ulimit -f 3 && exec "$0" exec --require-worker -c 'print(1)'`, cliBin(t))
	out, err := cmd.CombinedOutput()
	var ee *osexec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "raise the file size limit (ulimit -f)") || strings.Contains(string(out), "make build") {
		t.Fatalf("exec under ulimit -f 3: %v\n%s", err, out)
	}
}
