package supervisor_test

import (
	"context"
	"errors"
	"fmt"
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
