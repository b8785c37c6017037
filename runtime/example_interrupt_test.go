package runtime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// An interpreter whose guest sleeps waits on its InterruptSource; storing
// a signal wakes it at once (AtomicInterrupt is an InterruptWaiter).
func ExampleAtomicInterrupt_WaitInterrupt() {
	var intr runtime.AtomicInterrupt
	woken := make(chan bool)
	go func() {
		woken <- intr.WaitInterrupt(context.Background(), time.Minute)
	}()
	intr.Store(runtime.SIGINT)
	fmt.Println(<-woken, intr.Swap(0))

	// A wait with nothing stored ends with its time, reporting no signal.
	fmt.Println(intr.WaitInterrupt(context.Background(), time.Millisecond))
	// Output:
	// true 2
	// false
}
