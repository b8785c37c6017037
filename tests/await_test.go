package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// TestTopLevelAwait: a cell may await at its top level, as in IPython and
// in Pyodide's runPythonAsync (which DSPy's interpreter uses), through
// Execute and ExecuteInteractive, with the fast path and the bootstrap's
// (a cell that is not UTF-8, here a byte in a comment, takes the latter).
// The cell runs as asyncio.run would: its names stay in the sandbox, its
// exception's traceback starts at the cell, not in asyncio, the tasks it
// leaves are cancelled at its end (they do not run on in a later cell),
// the context it changes stays, a time limit stops it with the sandbox
// alive whether it waits or computes (as it stops a cell that calls
// asyncio.run), its traceback saying where the cell was, an interactive
// cell runs in one loop, and the prompt waits for the rest of a block
// that awaits.
func TestTopLevelAwait(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{Timeout: time.Second, GracePeriod: 5 * time.Second}, "")
		ctx := context.Background()
		def := "import asyncio\nasync def double(x):\n    await asyncio.sleep(0.01)\n    return 2 * x\n"
		if ce := exec(t, sb, def); ce.Error != "" {
			t.Fatalf("def: %+v", ce)
		}
		for _, c := range []struct{ name, code, want string }{
			{"statement", "r = await double(21)\nprint(r)", "42\n"},
			{"names kept", "print(r + 1)", "43\n"},
			{"gather", "print(await asyncio.gather(double(1), double(2)))", "[2, 4]\n"},
			{"async for", "async def gen():\n    for i in range(3):\n        yield i\nprint([i async for i in gen()])", "[0, 1, 2]\n"},
			{"bootstrap's path", "# \xff\nprint(await double(4))", "8\n"},
			{"asyncio.run after", "print(asyncio.run(double(5)))", "10\n"},
		} {
			if ce := exec(t, sb, c.code); ce.Stdout != c.want || ce.Error != "" {
				t.Errorf("%s: %+v, want %q", c.name, ce, c.want)
			}
		}

		for code, want := range map[string]string{
			"await double(50)": "100\n",
			// The parts before the last line and the last run in one
			// loop: the tasks the first starts are the last's to await
			// (with a loop each, the first had no loop, or its tasks were
			// cancelled before the last ran).
			"tasks = [asyncio.create_task(double(i)) for i in range(3)]\nawait asyncio.gather(*tasks)": "[0, 2, 4]\n",
			"t = asyncio.create_task(double(7))\nawait asyncio.sleep(0)\nawait t":                      "14\n",
		} {
			ce, err := sb.ExecuteInteractive(ctx, code)
			if err != nil || ce.Stdout != want || ce.Error != "" {
				t.Errorf("interactive %q: %+v, %v", code, ce, err)
			}
		}

		ce := exec(t, sb, "async def boom():\n    await asyncio.sleep(0)\n    raise ValueError('inside')\nawait boom()")
		if ce.ErrorType != "ValueError" || !strings.HasPrefix(ce.Traceback, "Traceback (most recent call last):\n  File \"<cell-") ||
			strings.Contains(ce.Traceback, "asyncio") || !strings.Contains(ce.Traceback, "in boom") {
			t.Errorf("error: %+v", ce)
		}

		ce = exec(t, sb, "n = 0\nasync def tick():\n    global n\n    while True:\n        n += 1\n        await asyncio.sleep(0.001)\n"+
			"task = asyncio.ensure_future(tick())\nawait asyncio.sleep(0.02)\nprint(n > 0)")
		if ce.Stdout != "True\n" {
			t.Errorf("ticking: %+v", ce)
		}
		ce = exec(t, sb, "before = n\nawait asyncio.sleep(0.05)\nprint(n == before, task.cancelled())")
		if ce.Stdout != "True True\n" {
			t.Errorf("a task left behind ran on: %+v", ce)
		}

		ce = exec(t, sb, "import decimal\nawait asyncio.sleep(0)\ndecimal.setcontext(decimal.Context(prec=5))")
		if ce.Error != "" {
			t.Fatalf("decimal: %+v", ce)
		}
		if ce := exec(t, sb, "print(decimal.Decimal(1) / 3)\ndecimal.setcontext(decimal.Context())"); ce.Stdout != "0.33333\n" {
			t.Errorf("the context a cell that awaits set did not stay: %+v", ce)
		}

		for _, c := range []struct {
			name, code string
			ownRun     bool // the code calls asyncio.run: its frames show
		}{
			// asyncio.run's SIGINT handler made the one interrupt a cancel
			// that busy code never saw, and the worker was killed.
			{"waiting", "await asyncio.sleep(60)", false},
			{"busy after an await", "await asyncio.sleep(0)\nwhile True: pass", false},
			{"sleeping in a coroutine", "import time\nasync def nap():\n    time.sleep(60)\nawait nap()", false},
			{"busy in asyncio.run", "async def spin():\n    await asyncio.sleep(0)\n    while True: pass\nasyncio.run(spin())", true},
		} {
			ce, err := sb.Execute(ctx, c.code)
			if !errors.Is(err, supervisor.ErrTimeout) || ce == nil || ce.ErrorType != "KeyboardInterrupt" || !strings.Contains(ce.Traceback, "File \"<cell-") ||
				!c.ownRun && strings.Contains(ce.Traceback, "asyncio/") {
				t.Fatalf("time limit, %s: %+v, %v", c.name, ce, err)
			}
			if ce := exec(t, sb, "print(await double(3))"); ce.Stdout != "6\n" {
				t.Errorf("after the time limit, %s: %+v", c.name, ce)
			}
		}

		// The prompt's test of a block: one that awaits is not complete
		// before its last line (it was taken for a syntax error, and run).
		for src, want := range map[string]bool{
			"for i in range(2):":                             false,
			"for i in range(2):\n    await asyncio.sleep(0)": false,
			"async with asyncio.timeout(1):":                 false,
			"await asyncio.sleep(0)":                         true,
		} {
			if got, err := sb.IsComplete(ctx, src); err != nil || got != want {
				t.Errorf("IsComplete(%q) = %v, %v; want %v", src, got, err, want)
			}
		}
	})
}
