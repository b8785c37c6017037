package wazeroinfo

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// TestPatched: Patched agrees with where the wazero this test binary was
// built from lives: the module cache (stock, go.mod has no replace) or the
// patched copy scripts/patch-wazero.sh writes to build/ (with
// -modfile=build/go.patched.mod). The source path is recorded in the
// binary's line table.
func TestPatched(t *testing.T) {
	pc := reflect.ValueOf(wazero.NewRuntimeConfigCompiler).Pointer()
	file, _ := runtime.FuncForPC(pc).FileLine(pc)
	want := strings.Contains(file, "/build/wazero-")
	if got := Patched(); got != want {
		t.Errorf("Patched() = %v, want %v: wazero is built from %s", got, want, file)
	}
}
