// Package emscripten implements in Go the Emscripten and Pyodide imports that
// CPython compiled to WebAssembly (pyodide.asm.wasm) needs, so the interpreter
// runs under wazero with no JavaScript engine.
//
// One file per area: fs.go and fd.go (the POSIX file syscalls over an
// in-memory file system), time.go, proc.go (environment, exit, abort),
// memory.go (heap growth, mmap), signal.go (interrupts), socket.go (an
// in-memory loopback network and nothing else), trampoline.go (CPython's
// function-pointer trampoline) and unsupported.go (what the sandbox refuses:
// dynamic loading, libffi, the JavaScript interop). registry.go lists them
// all in one table.
//
// Everything an interpreter's imports touch lives in one Host value, so each
// interpreter has its own file system, descriptor table and network, and a
// later snapshot can serialise it.
package emscripten
