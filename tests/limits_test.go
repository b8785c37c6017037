package tests

import (
	"os"
	osexec "os/exec"
	"strings"
	"testing"
)

// Under a virtual memory limit too low for the 4 GiB reservation of the
// guest's memory (`ulimit -v`, as some hosts and containers set), a sandbox
// still runs, in a worker and in-process: its memory then lives on the Go
// heap. It used to crash the worker, or with --direct the command, with a
// nil pointer dereference in wazero.
func TestUnderAddressSpaceLimit(t *testing.T) {
	if _, err := osexec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for _, args := range [][]string{{"exec", "-c", "print(sum(range(10)))"}, {"exec", "--direct", "-c", "print(sum(range(10)))"}} {
		t.Run(strings.Join(args[:len(args)-2], " "), func(t *testing.T) {
			// 4,000,000 KiB: room for the Go runtime and the compiled
			// module, not for a 4 GiB reservation besides.
			cmd := osexec.Command("sh", append([]string{"-c", `ulimit -v 4000000 && exec "$0" "$@"`, cliBin(t)}, args...)...)
			cmd.Env = os.Environ()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || string(out) != "45\n" {
				t.Fatalf("under ulimit -v: %v, stdout %q, stderr %q", err, out, stderr.String())
			}
			if strings.Contains(stderr.String(), "in-process") {
				t.Errorf("the worker did not run: %s", stderr.String())
			}
		})
	}
}
