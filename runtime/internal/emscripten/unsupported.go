package emscripten

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// UnsupportedError is the panic value of an import the sandbox does not
// offer and that has no errno to report through. The runtime turns it into
// an error naming the feature; the interpreter that reached it is finished.
type UnsupportedError struct {
	Import string // e.g. "env.ffi_call_js"
	What   string // the feature, e.g. "calling C functions through ctypes"
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s is not supported in the rlm-sandbox (import %s)", e.What, e.Import)
}

func trap(module, name, what string) api.GoModuleFunc {
	imp := module + "." + name
	return func(context.Context, api.Module, []uint64) {
		panic(&UnsupportedError{Import: imp, What: what})
	}
}

// whatIs names the feature behind an import the registry does not implement.
func whatIs(name string) string {
	switch {
	case len(name) > 4 && (name[:4] == "ffi_"):
		return "calling C functions through ctypes/libffi"
	case name == "_dlopen_js" || name == "_dlsym_js" || name == "_emscripten_dlopen_js":
		return "loading shared libraries (dlopen)"
	case name == "emscripten_asm_const_int":
		return "inline JavaScript"
	}
	return "the JavaScript interop of Pyodide (there is no JavaScript engine)"
}

// dlopenJS(handle): reports failure; the C side turns it into dlerror().
func (h *Host) dlopenJS(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// dlsymJS(handle, symbol, symbolIndexPtr): no symbol can be found.
func (h *Host) dlsymJS(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }
