// Package late records that its initialiser ran. It does not import the
// supervisor package either, but its import path, zz.example/late, sorts
// after every package the supervisor package depends on, so Go initialises
// it after the supervisor package: never in a worker started from the
// program (unless the program is built with rlmsandbox_noinithook).
package late

import (
	"fmt"
	"os"
	"path/filepath"
)

func init() {
	f, err := os.OpenFile(os.Getenv("SELFEXEC_INIT_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(f, "late %d %s\n", os.Getpid(), filepath.Base(os.Args[0]))
	if err := f.Close(); err != nil {
		panic(err)
	}
}

// Ran is referenced by main so that the package is linked in.
const Ran = true
