// Package harden locks down the process it runs in: the second wall around
// untrusted code, behind the WebAssembly boundary. The worker calls Apply
// once its interpreter is loaded (every file it needs read, its caches
// written) and before it runs any guest code. From then on the process
// keeps what it already holds (its pipes, its interrupt page, its memory)
// and can get nothing new: no file, no socket, no process, no privilege.
//
// What each layer stops, and why some limits are not used, is in
// RATIONALE.md ("The locked-down worker").
package harden

// Names of the layers, as Report lists them.
const (
	NoNewPrivs = "no_new_privs" // prctl(PR_SET_NO_NEW_PRIVS): no privilege gained by exec
	Rlimits    = "rlimits"      // no file writes, no core dumps, few descriptors
	Landlock   = "landlock"     // no file system access at all
	Seccomp    = "seccomp"      // a system call allow-list; the rest fail with EPERM
)

// Report says what Apply applied and what the kernel (or the build)
// refused, each refusal as "layer: why".
type Report struct {
	Applied []string
	Refused []string
}

func (r *Report) applied(name string) { r.Applied = append(r.Applied, name) }

func (r *Report) refused(name string, err error) {
	r.Refused = append(r.Refused, name+": "+err.Error())
}
