package supervisor

import (
	"os"
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
