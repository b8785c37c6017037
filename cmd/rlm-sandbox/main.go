// Command rlm-sandbox runs LLM-written Python in a sandbox from the shell:
// `exec` runs code once, `repl` is an interactive session, `serve --stdio`
// lets programs in any language drive sandboxes over JSON-RPC, `prepare`
// warms the caches and `version` reports versions.
package main

import (
	"os"

	"github.com/rlm-sandbox/rlm-sandbox/internal/procs"
)

func main() {
	if os.Getenv(bridgeReaperEnv) == "1" {
		os.Exit(reapBridges(os.Stdin))
	}
	reaperAllowed = true
	// Two Ps even on one CPU: the supervisor's wait for a worker's next
	// message is a blocking poll(2), which would otherwise hold up the
	// goroutines that answer it (procs.AtLeastTwo).
	procs.AtLeastTwo()
	os.Exit(run(os.Args[1:], systemStreams()))
}
