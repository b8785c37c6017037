package supervisor

import (
	"encoding/json"
	"reflect"
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
