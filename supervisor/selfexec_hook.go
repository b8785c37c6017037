//go:build !rlmsandbox_noinithook

package supervisor

// initHook says whether the package's initialiser turns a child started as
// the program's own worker into one (see ServeWorkerIfChild).
const initHook = true

func init() { serveIfChild() }
