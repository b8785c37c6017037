//go:build rlmsandbox_noinithook

package supervisor

// initHook: built with rlmsandbox_noinithook, the program turns the child
// into a worker itself, by calling ServeWorkerIfChild.
const initHook = false
