// Command rlm-worker hosts one sandbox's interpreter for the supervisor.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "rlm-worker: not implemented yet")
	os.Exit(2)
}
