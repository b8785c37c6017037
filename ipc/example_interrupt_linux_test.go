//go:build linux

package ipc_test

import (
	"fmt"

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
