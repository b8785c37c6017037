package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIPrepare: on a pipe, prepare prints plain lines, one when each
// step starts and one when it ends, and its last step runs Python.
func TestCLIPrepare(t *testing.T) {
	out, errOut, code := runCLI(t, "", "prepare")
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b[") {
		t.Fatalf("terminal controls in plain output: %q", out)
	}
	for _, want := range []string{"Pyodide 314.0.7", "ready", "standard library", "cached in", "sandbox", "Python 3."} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in %q", want, out)
		}
	}
}

// TestCLIPrepareTerminal: on a terminal, each step is one line redrawn in
// place and ticked off.
func TestCLIPrepareTerminal(t *testing.T) {
	term := startTerminal(t, "prepare")
	if code := term.wait(); code != 0 {
		t.Fatalf("exit %d; the terminal shows %q", code, term.out)
	}
	term.expect("\r\x1b[K✓ Pyodide")
	term.expect("\r\x1b[K✓ standard library")
	term.expect("\r\x1b[K✓ sandbox: start one and run Python: Python 3.")
}

func TestCLIVersion(t *testing.T) {
	out, errOut, code := runCLI(t, "", "version")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"rlm-sandbox ", "protocol    1 (serve, JSON-RPC 2.0); worker protocol ", "pyodide     314.0.7\n", "python      3.14."} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in %q", want, out)
		}
	}
	out, _, code = runCLI(t, "", "version", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("exit %d, %q", code, out)
	}
	if v["protocol"] != 1.0 || v["pyodide"] != "314.0.7" || !strings.HasPrefix(v["python"].(string), "3.14.") || v["rlm_sandbox"] == "" {
		t.Fatalf("%v", v)
	}
}

func TestCLIHelp(t *testing.T) {
	runCLICases(t, []cliCase{
		{name: "no command", args: nil, outFunc: func(t *testing.T, out string) {
			for _, cmd := range []string{"exec", "repl", "serve", "prepare", "version", "124"} {
				if !strings.Contains(out, cmd) {
					t.Fatalf("no %q in the help: %q", cmd, out)
				}
			}
		}},
		{name: "exec --help", args: []string{"exec", "--help"}, outFunc: func(t *testing.T, out string) {
			for _, flag := range []string{"--code", "--context-json", "--llm-cmd", "--rlm-cmd", "--json", "--timeout", "--memory-limit", "--direct"} {
				if !strings.Contains(out, flag) {
					t.Fatalf("no %q in the help: %q", flag, out)
				}
			}
		}},
		{name: "serve without --stdio", args: []string{"serve"}, errHas: []string{"--stdio"}, code: 2},
	})
}
