// Command rlm-sandbox runs LLM-written Python in a sandbox from the shell:
// `exec` runs code once, `repl` is an interactive session, `serve --stdio`
// lets programs in any language drive sandboxes over JSON-RPC, `prepare`
// warms the caches and `version` reports versions.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], systemStreams())) }
