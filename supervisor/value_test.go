package supervisor

import (
	"encoding/json"
	"reflect"
	"testing"
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
	want := map[string]any{"who": map[string]any{"name": "ada"}, "level": "high", "n": int64(3)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}
