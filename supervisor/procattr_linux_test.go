package supervisor

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The kernel's refusals of new namespaces are told from other start
// failures, and remembered.
func TestRefuseNamespaces(t *testing.T) {
	defer func() { namespaces.refused = "" }()
	if refuseNamespaces(&os.PathError{Op: "fork/exec", Path: "rlm-worker", Err: syscall.ENOENT}) {
		t.Fatal("ENOENT taken for a refusal of namespaces")
	}
	if why := namespacesRefused(); why != "" {
		t.Fatalf("remembered %q", why)
	}
	if !refuseNamespaces(&os.PathError{Op: "fork/exec", Path: "rlm-worker", Err: syscall.EPERM}) {
		t.Fatal("EPERM not taken for a refusal of namespaces")
	}
	if why := namespacesRefused(); why == "" {
		t.Fatal("the refusal is not remembered")
	}
}

func TestMayDownload(t *testing.T) {
	t.Setenv("RLM_PYODIDE_INDEX_URL", "")
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{}, true},
		{Config{PyodideDir: "/p"}, false},
		{Config{IndexURL: []string{"/local"}}, false},
		{Config{IndexURL: []string{"/local", "https://cdn.example/pyodide/"}}, true},
	} {
		if got := mayDownload(c.cfg); got != c.want {
			t.Errorf("mayDownload(%+v) = %v, want %v", c.cfg, got, c.want)
		}
	}
}

// explainExit names an out-of-memory kill only for a SIGKILL the
// supervisor did not send, while the cgroup's count of such kills rose.
func TestExplainExit(t *testing.T) {
	killed := exec.Command("/bin/sh", "-c", "kill -9 $$").Run()
	failed := exec.Command("/bin/sh", "-c", "exit 1").Run()
	count := int64(5)
	s := &workerSandbox{oomKills: func() (int64, bool) { return count, true }, oomBase: 5}
	for _, c := range []struct {
		name    string
		err     error
		count   int64
		killing bool
		oom     bool
	}{
		{"SIGKILL, no kill counted", killed, 5, false, false},
		{"SIGKILL, a kill counted", killed, 6, false, true},
		{"the supervisor's SIGKILL", killed, 6, true, false},
		{"exit status 1", failed, 6, false, false},
	} {
		count = c.count
		s.killing.Store(c.killing)
		got := s.explainExit(c.err)
		if errors.Is(got, ErrOutOfMemory) != c.oom || !errors.Is(got, c.err) {
			t.Errorf("%s: %v (ErrOutOfMemory: %v, want %v)", c.name, got, errors.Is(got, ErrOutOfMemory), c.oom)
		}
	}
	if got := (&workerSandbox{}).explainExit(killed); got != killed {
		t.Errorf("without a counter: %v", got)
	}
}
