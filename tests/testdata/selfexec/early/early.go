// Package early records that its initialiser ran. Its import path,
// example.com/selfexec/early, sorts before github.com/rlm-sandbox/..., and
// it does not import the supervisor package, so Go initialises it before
// the supervisor package: in a worker started from the program too.
package early

import (
	"fmt"
	"os"
	"path/filepath"
)

func init() { Record("early") }

// Record appends "NAME PID ARGV0" to the file $SELFEXEC_INIT_LOG.
func Record(name string) {
	f, err := os.OpenFile(os.Getenv("SELFEXEC_INIT_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(f, "%s %d %s\n", name, os.Getpid(), filepath.Base(os.Args[0]))
	if err := f.Close(); err != nil {
		panic(err)
	}
}
