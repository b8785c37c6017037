// Command rlm-worker hosts one sandbox's Python interpreter for the
// supervisor (package supervisor), which starts it. Its stdin and stdout
// carry ipc frames only; its stderr carries JSON log lines; fd 3 is the
// shared interrupt page. It ignores SIGINT (the supervisor decides when
// code is interrupted) and exits when stdin closes.
package main

import (
	"os"

	"github.com/rlm-sandbox/rlm-sandbox/internal/worker"
)

func main() { os.Exit(worker.Main(os.Args[1:])) }
