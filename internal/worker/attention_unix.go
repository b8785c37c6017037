//go:build unix

package worker

import (
	"os"
	"syscall"
)

// AttentionSignal is the signal the supervisor sends a worker when it has
// sent a request that must be answered while code runs (Stats): the
// worker then starts reading again (see Options.Attention).
var AttentionSignal os.Signal = syscall.SIGUSR1
