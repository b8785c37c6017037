package supervisor

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

type marshalledName string

func (n marshalledName) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"name": string(n)})
}

type textLevel int

func (l textLevel) MarshalText() ([]byte, error) { return []byte([]string{"low", "high"}[l]), nil }

// A value with its own JSON form reaches Python as that form, as
// encoding/json would write it, even when its kind is a string or number.
func TestPythonValueUsesMarshalers(t *testing.T) {
	got, err := pythonValue(map[string]any{"who": marshalledName("ada"), "level": textLevel(1), "n": 3})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"who": runtime.Dict{{Key: "name", Value: "ada"}}, "level": "high", "n": int64(3)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

type person struct {
	Name  string `json:"name"`
	Age   int    `json:"age"`
	Email string `json:"email,omitempty"`
}

// Values converted through JSON (structs, json.RawMessage) keep the order
// of their members, as json.loads would.
func TestPythonValueKeepsJSONOrder(t *testing.T) {
	got, err := pythonValue([]any{person{Name: "ada", Age: 36}, json.RawMessage(`{"z": 1, "a": [true], "z": 2}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		runtime.Dict{{Key: "name", Value: "ada"}, {Key: "age", Value: int64(36)}},
		runtime.Dict{{Key: "z", Value: int64(2)}, {Key: "a", Value: []any{true}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

// TestPythonValueCycle: a value that contains itself is refused as too
// deep (a struct's pointers by encoding/json), in a message that says it
// may be a cycle and does not repeat its path.
func TestPythonValueCycle(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	s := make([]any, 1)
	s[0] = s
	type node struct{ Next *node }
	n := &node{}
	n.Next = n
	for name, v := range map[string]any{"map": m, "slice": s, "pointer": n} {
		_, err := pythonValue(v)
		if err == nil || !strings.Contains(err.Error(), "cycle") || len(err.Error()) > 200 || name != "pointer" && !errors.Is(err, errTooDeep) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Other errors still name the key.
	if _, err := pythonValue(map[string]any{"ch": make(chan int)}); err == nil || !strings.Contains(err.Error(), `"ch"`) {
		t.Errorf("a channel: %v", err)
	}
}
