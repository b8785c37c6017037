package tests

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// hostile is a program a new user (or a model) might send, and what must
// come of it: a Python error of one of the given types, or a timeout.
// Either way the sandbox must then be usable, or cleanly dead and brought
// back by Restart.
type hostile struct {
	name, code string
	errorType  string // the exceptions accepted, "A|B"; "*": any; "": none
	timeout    bool   // a timeout is accepted (for the slow ones, as well as errorType)
}

var hostilePrograms = []hostile{
	{name: "endless loop", code: "while True: pass", timeout: true},
	{name: "swallowed KeyboardInterrupt", code: "while True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        pass", timeout: true},
	{name: "sleep", code: "import time\ntime.sleep(3600)", timeout: true},
	{name: "memory bomb", code: "x = []\nwhile True: x.append(bytearray(10**7))", errorType: "MemoryError", timeout: true},
	{name: "one huge allocation", code: "x = bytearray(2**30)", errorType: "MemoryError"},
	{name: "print flood", code: "while True: print('x' * 1000)", timeout: true},
	{name: "deep recursion", code: "def f(): return f()\nf()", errorType: "RecursionError"},
	{name: "host file", code: "open('/etc/passwd').read()", errorType: "FileNotFoundError"},
	{name: "socket", code: "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 22))", errorType: "*"},
	{name: "import js", code: "import js\njs.eval('1')", errorType: "*"},
	{name: "10 MB integer to str", code: "str(1 << 33_000_000)", errorType: "ValueError"},
	{name: "descriptor exhaustion", code: "fs = [open('/tmp/fd%d' % i, 'w') for i in range(1_000_000)]", errorType: "OSError|MemoryError", timeout: true},
	{name: "/tmp disk filler", code: "f = open('/tmp/fill', 'wb')\nwhile True: f.write(b'x' * (1 << 20))", errorType: "OSError", timeout: true},
	{name: "recursive __repr__ of an exception", code: "class E(Exception):\n    def __repr__(self): return repr(self)\n    def __str__(self): return str(self)\nraise E()", errorType: "*"},
	{name: "endless generator in print(*gen)", code: "def g():\n    while True: yield 1\nprint(*g())", errorType: "MemoryError", timeout: true},
}

// TestHostilePrograms runs each hostile program in a fresh worker sandbox,
// logging the outcome (the table in the README is this test's output).
func TestHostilePrograms(t *testing.T) {
	ctx := context.Background()
	cfg := supervisor.Config{Timeout: 3 * time.Second, GracePeriod: time.Second, MemoryLimit: 512 << 20, MaxOutputLength: 1000}
	for _, h := range hostilePrograms {
		t.Run(strings.ReplaceAll(h.name, " ", "_"), func(t *testing.T) {
			sb := newSandbox(t, workerMode, cfg, "")
			start := time.Now()
			res, err := sb.Execute(ctx, h.code)
			took := time.Since(start).Round(time.Millisecond)
			outcome := ""
			switch {
			case h.timeout && errors.Is(err, supervisor.ErrTimeout):
				outcome = "timeout"
			case err != nil:
				t.Fatalf("got error %v, want a Python %s (timeout accepted: %v)", err, h.errorType, h.timeout)
			case res.Error == "" || h.errorType == "":
				t.Fatalf("got %+v, want a Python %s (timeout accepted: %v)", res, h.errorType, h.timeout)
			case h.errorType != "*" && !slices.Contains(strings.Split(h.errorType, "|"), res.ErrorType):
				t.Fatalf("got %s, want %s", res.Error, h.errorType)
			default:
				outcome = res.Error
			}
			after := "usable"
			if res2, err := sb.Execute(ctx, "print(1 + 1)"); err != nil {
				if !errors.Is(err, supervisor.ErrDead) {
					t.Fatalf("afterwards: %v, want the sandbox usable or dead", err)
				}
				after = "dead, restarted"
				if err := sb.Restart(ctx); err != nil {
					t.Fatalf("restart: %v", err)
				}
				if err := sb.Initialize(ctx, ""); err != nil {
					t.Fatal(err)
				}
				if res2, err := sb.Execute(ctx, "print(1 + 1)"); err != nil || res2.Stdout != "2\n" {
					t.Fatalf("after restart: %+v, %v", res2, err)
				}
			} else if res2.Stdout != "2\n" {
				t.Fatalf("afterwards: %+v", res2)
			}
			if len(outcome) > 120 {
				outcome = outcome[:120] + "…"
			}
			t.Logf("| %s | %s | %v | %s |", h.name, outcome, took, after)
		})
	}
}
