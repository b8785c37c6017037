// Package convert maps values between the runtime's Go representation of
// Python data and the ipc wire representation. They differ only in the
// types of sets, tuples and non-string-keyed dicts.
package convert

import (
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// ToIPC converts a runtime value for the wire.
func ToIPC(v any) any {
	switch x := v.(type) {
	case runtime.Set:
		out := make(ipc.Set, len(x))
		for i, e := range x {
			out[i] = ToIPC(e)
		}
		return out
	case runtime.Dict:
		out := make(ipc.Dict, len(x))
		for i, it := range x {
			out[i] = ipc.Pair{Key: ToIPC(it.Key), Value: ToIPC(it.Value)}
		}
		return out
	case runtime.Tuple:
		out := make(ipc.Tuple, len(x))
		for i, e := range x {
			out[i] = ToIPC(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = ToIPC(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = ToIPC(e)
		}
		return out
	}
	return v
}

// FromIPC converts a wire value to the runtime's representation.
func FromIPC(v any) any {
	switch x := v.(type) {
	case ipc.Set:
		out := make(runtime.Set, len(x))
		for i, e := range x {
			out[i] = FromIPC(e)
		}
		return out
	case ipc.Tuple:
		out := make(runtime.Tuple, len(x))
		for i, e := range x {
			out[i] = FromIPC(e)
		}
		return out
	case ipc.Dict:
		out := make(runtime.Dict, len(x))
		for i, p := range x {
			out[i] = runtime.Item{Key: FromIPC(p.Key), Value: FromIPC(p.Value)}
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = FromIPC(e)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = FromIPC(e)
		}
		return x
	}
	return v
}
