package ipc_test

import (
	"bytes"
	"fmt"
	"math/big"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
)

// Frame a request, send it through a pipe (here a buffer), and read it
// back on the other side.
func Example() {
	var pipe bytes.Buffer
	w := ipc.NewWriter(&pipe)
	if err := w.WriteMessage(ipc.KindExecute, 7, ipc.Execute{Code: "print(6 * 7)"}); err != nil {
		panic(err)
	}
	fmt.Printf("frame: % x\n", pipe.Bytes()[:4])

	r := ipc.NewReader(&pipe)
	m, err := r.ReadMessage()
	if err != nil {
		panic(err)
	}
	var ex ipc.Execute
	if err := m.Into(&ex); err != nil {
		panic(err)
	}
	fmt.Println(m.Kind, m.ID, ex.Code)
	// Output:
	// frame: 00 00 00 23
	// execute 7 print(6 * 7)
}

// Replies are matched to requests by ID; a type switch on Body dispatches.
func ExampleDecode() {
	frame, _ := ipc.Encode(ipc.KindResult, 7, ipc.Result{ErrorType: "KeyError", DurationNanos: 1500})
	m, err := ipc.Decode(frame)
	if err != nil {
		panic(err)
	}
	switch b := m.Body.(type) {
	case ipc.Result:
		fmt.Printf("result for %d: %s in %dns\n", m.ID, b.ErrorType, b.DurationNanos)
	case ipc.Error:
		fmt.Println("request failed:", b)
	}
	// Output: result for 7: KeyError in 1500ns
}

// Python values keep their shape: big integers, sets and dicts with
// non-string keys each have a Go form.
func ExampleEncodeValue() {
	huge, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	b, err := ipc.EncodeValue(map[string]any{
		"n":     huge,
		"small": 5,
		"s":     ipc.Set{"a", "b"},
		"d":     ipc.Dict{{Key: 1, Value: "one"}, {Key: []any{2, 3}, Value: "tuple key"}},
	})
	if err != nil {
		panic(err)
	}
	v, err := ipc.DecodeValue(b)
	if err != nil {
		panic(err)
	}
	m := v.(map[string]any)
	fmt.Printf("%T %v\n", m["n"], m["n"])
	fmt.Printf("%T %v\n", m["small"], m["small"])
	fmt.Printf("%T %v\n", m["s"], m["s"])
	fmt.Printf("%T %v\n", m["d"], m["d"])
	// Output:
	// *big.Int 123456789012345678901234567890
	// int64 5
	// ipc.Set [a b]
	// ipc.Dict [{1 one} {[2 3] tuple key}]
}

func ExampleCheckHello() {
	err := ipc.CheckHello(ipc.Hello{ProtocolVersion: 6, PythonVersion: "3.12.7"})
	fmt.Println(err)
	// Output: rlm-worker speaks protocol 6, this supervisor speaks 5: rebuild the worker (make) so both come from the same version
}
