// Package wazeroinfo says which wazero a program was built with.
package wazeroinfo

import "github.com/tetratelabs/wazero"

// Patched reports whether this program was built with the wazero that
// scripts/patch-wazero.sh patches (the binaries `make build` writes, or a
// test binary built with -modfile=build/go.patched.mod): only it has patch
// 0004's compiler configuration. Unlike the build information, this also
// holds in a test binary, which records no modules.
func Patched() bool {
	_, ok := wazero.NewRuntimeConfigCompiler().(interface {
		WithoutMemoryBoundsChecks() wazero.RuntimeConfig
	})
	return ok
}
