package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIFlagValues checks that meaningless flag values are usage errors
// (exit 2) with a message saying what is wrong, in exec and in repl.
func TestCLIFlagValues(t *testing.T) {
	nested := func(levels int, inner string) string {
		return strings.Repeat("[", levels) + inner + strings.Repeat("]", levels)
	}
	const tooDeep = "--context-json: the value is nested more than 200 levels deep"
	runCLICases(t, []cliCase{
		{name: "empty --context-file", args: []string{"exec", "--context-file", "", "-c", "pass"},
			errHas: []string{"--context-file is empty"}, code: 2},
		{name: "empty --context-json", args: []string{"exec", "--context-json", "", "-c", "pass"},
			errHas: []string{"--context-json is empty"}, code: 2},
		{name: "empty --context-file, repl", args: []string{"repl", "--context-file", ""},
			errHas: []string{"--context-file is empty"}, code: 2},
		{name: "empty --context still a context", args: []string{"exec", "--context", "", "-c", "print(repr(context))"}, out: "''\n"},

		{name: "--memory-limit of one byte", args: []string{"exec", "--memory-limit", "1", "-c", "pass"},
			errHas: []string{"--memory-limit must be from 32M to 4G"}, code: 2},
		{name: "--memory-limit below 32M", args: []string{"exec", "--memory-limit", "32767K", "-c", "pass"},
			errHas: []string{"--memory-limit must be from 32M to 4G"}, code: 2},
		{name: "--memory-limit 8G", args: []string{"exec", "--memory-limit", "8G", "-c", "pass"},
			errHas: []string{"--memory-limit must be from 32M to 4G"}, code: 2},
		{name: "--memory-limit past 4G", args: []string{"exec", "--memory-limit", "4294967297", "-c", "pass"},
			errHas: []string{"--memory-limit must be from 32M to 4G"}, code: 2},
		{name: "--memory-limit 8G, repl", args: []string{"repl", "--memory-limit", "8G"},
			errHas: []string{"--memory-limit must be from 32M to 4G"}, code: 2},
		{name: "negative --timeout", args: []string{"exec", "--timeout", "-1s", "-c", "print(1)"},
			errHas: []string{"--timeout must be 0 (never) or more, not -1s"}, code: 2},
		{name: "negative --wall-timeout, repl", args: []string{"repl", "--wall-timeout", "-5m"},
			errHas: []string{"--wall-timeout must be 0 (never) or more, not -5m0s"}, code: 2},
		{name: "negative --max-output", args: []string{"exec", "--max-output", "-1", "-c", "print(1)"},
			errHas: []string{"--max-output must be 0 (the default) or more, not -1"}, code: 2},
		{name: "--timeout 0", args: []string{"exec", "--timeout", "0", "-c", "print(1)"}, out: "1\n"},
		{name: "--memory-limit 32M", args: []string{"exec", "--memory-limit", "32M", "-c", "print(1)"}, out: "1\n"},
		{name: "--memory-limit 4G", args: []string{"exec", "--memory-limit", "4G", "-c", "print(1)"}, out: "1\n"},
		{name: "--memory-limit 0", args: []string{"exec", "--memory-limit", "0", "-c", "print(1)"}, out: "1\n"},

		{name: "--context-json 1e400", args: []string{"exec", "--context-json", "1e400", "-c", "pass"},
			errHas: []string{"--context-json: the number 1e400 is out of range"}, code: 2},
		{name: "--context-json [-1e400]", args: []string{"exec", "--context-json", "[-1e400]", "-c", "pass"},
			errHas: []string{"--context-json: the number -1e400 is out of range"}, code: 2},
		// The supervisor's limit: the top-level value is level 0.
		{name: "nested 200 levels", args: []string{"exec", "--context-json", nested(200, "1"), "-c", "print(type(context).__name__)"}, out: "list\n"},
		{name: "nested 201 levels", args: []string{"exec", "--context-json", nested(201, "1"), "-c", "pass"},
			errHas: []string{tooDeep}, code: 2},
		{name: "objects nested 201 levels", args: []string{"exec", "--context-json",
			strings.Repeat(`{"a": `, 201) + "1" + strings.Repeat("}", 201), "-c", "pass"},
			errHas: []string{tooDeep}, code: 2},
		{name: "brackets in strings do not count", args: []string{"exec", "--context-json",
			`["` + strings.Repeat(`[\"`, 300) + `"]`, "-c", "print(len(context[0]))"}, out: "600\n"},
		{name: "nested 20,000 levels", args: []string{"exec", "--context-json", nested(20_000, ""), "-c", "pass"},
			errHas: []string{tooDeep}, code: 2},
	})
}

// --require-worker (or $RLM_SANDBOX_REQUIRE_WORKER=1) keeps the code out of
// the command's own process: no rlm-worker to start is an error (status 3)
// rather than a warning and a run in-process, and --direct is refused.
func TestCLIRequireWorker(t *testing.T) {
	missing := []string{"RLM_WORKER=" + filepath.Join(t.TempDir(), "no-rlm-worker")}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no worker", missing, []string{"exec", "-c", "print('ran')"}, 0, "running in-process"},
		{"no worker, --require-worker", missing, []string{"exec", "--require-worker", "-c", "print('ran')"}, 3, "worker unavailable"},
		{"no worker, environment", append(missing, "RLM_SANDBOX_REQUIRE_WORKER=1"), []string{"exec", "-c", "print('ran')"}, 3, "worker unavailable"},
		{"--direct, environment", []string{"RLM_SANDBOX_REQUIRE_WORKER=1"}, []string{"exec", "--direct", "-c", "print('ran')"}, 2, "forbids"},
		{"--direct, --require-worker", nil, []string{"repl", "--direct", "--require-worker"}, 2, "forbids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLIEnv(t, tc.env, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("status %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if ran := stdout == "ran\n"; ran != (tc.code == 0) {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
}
