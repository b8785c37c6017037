package tests

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDockerfileServe: the image's default command is a serve command
// line its binary accepts, with what docs/serve.md asks of --listen: a
// token, and --require-worker, so that no client's code ever runs
// unconfined inside the server.
func TestDockerfileServe(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", "") // join continued lines
	m := regexp.MustCompile(`(?m)^CMD\s+(\[.*\])\s*$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the Dockerfile has no CMD in exec form")
	}
	var args []string
	if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
		t.Fatalf("CMD %s: %v", m[1], err)
	}
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("CMD %q does not run serve", args)
	}
	for _, flag := range []string{"--listen", "--token-file", "--require-worker"} {
		if !slices.ContainsFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") }) {
			t.Errorf("CMD %q lacks %s", args, flag)
		}
	}
	// The flags parse: --help after them succeeds only then.
	if _, stderr, code := runCLI(t, "", append(args, "--help")...); code != 0 {
		t.Errorf("rlm-sandbox %q --help: exit %d; stderr %s", args, code, stderr)
	}
}
