//go:build rlm_testhooks

// Command oobprobe is a worker-like process for tests/bounds_test.go: it
// sets the runtime up as rlm-worker does (-drop: runtime.DropBoundsChecks)
// and runs a guest load at an address, through the engine configuration
// and linear memory the guest gets. It prints "ok" or "trap: …"; an access
// that faults kills it. Built only by that test (the rlm_testhooks tag).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

func main() {
	drop := flag.Bool("drop", false, "drop bounds checks as rlm-worker does")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: oobprobe [-drop] load|far ADDR")
		os.Exit(2)
	}
	addr, err := strconv.ParseUint(flag.Arg(1), 0, 32)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *drop && !runtime.DropBoundsChecks() {
		fmt.Fprintln(os.Stderr, "oobprobe: bounds checks cannot be dropped in this build")
		os.Exit(3)
	}
	if err := runtime.ProbeOutOfBounds(context.Background(), flag.Arg(0), uint32(addr)); err != nil {
		fmt.Println("trap:", err)
		return
	}
	fmt.Println("ok")
}
