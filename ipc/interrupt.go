package ipc

// SignalInterrupt is the value the supervisor stores in the interrupt page
// to interrupt running Python: SIGINT's number, which Pyodide's interrupt
// buffer turns into KeyboardInterrupt.
const SignalInterrupt int32 = 2

// PageWordSize is the minimum size of a file that OpenPage accepts: the
// interrupt word is an int32 at offset 0, in native byte order (both ends
// run on the same machine).
const PageWordSize = 4
