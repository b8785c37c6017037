//go:build linux

package ipc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// The supervisor creates the page and passes page.File() to the worker in
// exec.Cmd.ExtraFiles; the worker maps it with ipc.OpenPage. Both views
// share the word, shown here with one mapping.
func ExamplePage() {
	page, err := ipc.NewPage()
	if err != nil {
		panic(err)
	}
	defer page.Close()

	// Supervisor: interrupt.
	page.Store(ipc.SignalInterrupt)

	// Worker: take the pending signal, leaving 0 behind.
	fmt.Println(page.Swap(0))
	fmt.Println(page.Load())
	// Output:
	// 2
	// 0
}

// The worker's interpreter, while its guest sleeps, waits on the page
// instead of polling it; the supervisor's Store wakes it at once.
func ExamplePage_WaitInterrupt() {
	page, err := ipc.NewPage()
	if err != nil {
		panic(err)
	}
	defer page.Close()

	woken := make(chan bool)
	go func() { // worker: wait up to a minute for an interrupt
		woken <- page.WaitInterrupt(context.Background(), time.Minute)
	}()
	page.Store(ipc.SignalInterrupt) // supervisor: interrupt
	fmt.Println(<-woken)
	// Output:
	// true
}
