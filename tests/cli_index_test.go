package tests

import (
	"strings"
	"testing"
)

// --index-url reaches the loader: with an empty cache and only unusable
// entries, exec fails with exit status 3 and names every entry and why,
// once (a worker that failed in new namespaces is started again with the
// network; when that fails too, only its error is printed).
func TestCLIIndexURL(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{
		{"exec", "--direct", "-c", "print(1)"},
		{"exec", "-c", "print(1)"},
	} {
		args = append(args, "--index-url", "http://127.0.0.1:1/pyodide/", "--index-url", empty+"/missing")
		_, stderr, code := runCLIEnv(t, []string{"RLM_SANDBOX_CACHE=" + t.TempDir()}, "", args...)
		if code != 3 || strings.Count(stderr, "http://127.0.0.1:1/pyodide/: ") != 1 || strings.Count(stderr, empty+"/missing: ") != 1 {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
	}
}
