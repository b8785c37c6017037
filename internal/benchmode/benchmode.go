// Package benchmode lists the modes the benchmarks run sandboxes in.
package benchmode

import (
	"github.com/rlm-sandbox/rlm-sandbox/internal/wazeroinfo"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// Mode is one way to run a sandbox, named as the benchmarks report it.
type Mode struct {
	Name string
	Mode supervisor.WorkerMode
}

// All returns the modes a benchmark runs in: a worker (bin/rlm-worker, which
// runs patched wazero) and direct mode with stock wazero, as a program
// importing this module runs it. A test binary built with the patched wazero
// the binaries use (`make bench` builds one too) runs only direct mode,
// named direct-patched: its worker rows would be the same as the other's.
func All() []Mode {
	if wazeroinfo.Patched() {
		return []Mode{{"direct-patched", supervisor.WorkerNever}}
	}
	return []Mode{{"worker", supervisor.WorkerAlways}, {"direct", supervisor.WorkerNever}}
}
