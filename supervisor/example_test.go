package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

func Example() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()

	if err := sb.Initialize(ctx, "alpha beta gamma beta"); err != nil {
		fmt.Println(err)
		return
	}
	ce, err := sb.Execute(ctx, "words = context.split()\nprint(words.count('beta'))")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(ce.Stdout)

	words, found, _ := sb.GetVariable(ctx, "words")
	fmt.Println(found, words)
	// Output:
	// 2
	// true [alpha beta gamma beta]
}

func ExampleSandbox_Execute_exception() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerNever})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	_ = sb.Initialize(ctx, "")

	ce, err := sb.Execute(ctx, "print('partial')\n{}['missing']")
	fmt.Println(err)
	fmt.Print(ce.Stdout)
	fmt.Println(ce.ErrorType, ce.Error)
	// Output:
	// <nil>
	// partial
	// KeyError KeyError: 'missing'
}

func ExampleSandbox_Execute_timeout() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{Timeout: 200 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	_ = sb.Initialize(ctx, "")

	ce, err := sb.Execute(ctx, "while True: pass")
	fmt.Println(errors.Is(err, supervisor.ErrTimeout), ce.ErrorType)

	ce, _ = sb.Execute(ctx, "print('still usable')")
	fmt.Print(ce.Stdout)
	// Output:
	// true KeyboardInterrupt
	// still usable
}

// An agent's code asks the host's language model through llm_query; the
// time spent waiting for answers does not count against Timeout.
func ExampleConfig_OnLLMQuery() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{
		Timeout: 10 * time.Second,
		OnLLMQuery: func(ctx context.Context, prompt string) (string, error) {
			return "summary of " + prompt, nil // call your model here
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	_ = sb.Initialize(ctx, "chapter one. chapter two. chapter three.")

	ce, err := sb.Execute(ctx, `
chunks = chunk_text(context, size=15, overlap=0)
answers = llm_query_batched(chunks)   # concurrently, answers in order
print(len(answers), answers[0])`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(ce.Stdout)
	fmt.Println(ce.BridgeCalls, "bridge calls")
	// Output:
	// 3 summary of chapter one. ch
	// 3 bridge calls
}

// A pool keeps sandboxes started ahead of use, for agents that create many.
func ExamplePool() {
	ctx := context.Background()
	pool := supervisor.NewPool(supervisor.Config{Timeout: 10 * time.Second}, 2)
	defer pool.Close()

	sb, err := pool.Get(ctx) // already started: no process start to wait for
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	_ = sb.Initialize(ctx, "sub-task input")
	ce, _ := sb.Execute(ctx, "print(context.upper())")
	fmt.Print(ce.Stdout)
	// Output: SUB-TASK INPUT
}

// A program's main that starts sandboxes. Built as usual, the call only
// states the intent: when no rlm-worker binary is found, New starts this
// program again as the sandbox's worker, and the package's initialiser
// turns that copy into the worker before main. Built with -tags
// rlmsandbox_noinithook, the call is what does it, and New re-executes the
// program only after it has been made.
func ExampleServeWorkerIfChild() {
	supervisor.ServeWorkerIfChild() // in the worker, does not return

	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	// With no rlm-worker installed, the Reason is "worker started (self
	// re-exec: ...)".
	fmt.Println("worker process:", sb.Info().Worker)
	// Output: worker process: true
}

// A worker locks itself down before it runs any code; Info says how. The
// layers the kernel refused are in HardeningRefused, each with the reason.
func ExampleInfo_hardening() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	info := sb.Info()
	fmt.Println("applied:", strings.Join(info.Hardening, ", "))
	for _, why := range info.HardeningRefused {
		fmt.Println("refused:", why)
	}
}

// HardeningOff is for debugging the worker itself (strace, a debugger):
// the code is then confined by the WebAssembly boundary alone.
func ExampleHardening_off() {
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways, Hardening: supervisor.HardeningOff})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy()
	fmt.Println(len(sb.Info().Hardening)) // 0
}
