package tests

import (
	"strings"
	"testing"
)

// TestCLITimeoutHint checks that the hint after a timeout names the flag
// whose time ran out.
func TestCLITimeoutHint(t *testing.T) {
	const wall, python = "hint: raise --wall-timeout", "hint: raise --timeout"
	cases := []struct {
		name      string
		args      []string
		want, not string
	}{
		{"--wall-timeout", []string{"exec", "--wall-timeout", "300ms", "--llm-cmd", "sleep 60", "-c", "llm_query('x')"}, wall, python},
		{"--timeout", []string{"exec", "--timeout", "300ms", "-c", "while True: pass"}, python, wall},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, "", c.args...)
			if code != 124 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.not) {
				t.Fatalf("exit %d, stderr %q; want 124 and %q", code, errOut, c.want)
			}
		})
	}
	t.Run("repl", func(t *testing.T) {
		_, errOut, code := runCLI(t, "llm_query('x')\nprint('goes on')\n", "repl", "--wall-timeout", "300ms", "--llm-cmd", "sleep 60")
		if code != 0 || !strings.Contains(errOut, "the code ran longer than --wall-timeout\n") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
}
