package runtime

import (
	"context"
	"slices"
	"testing"
)

// The engine reads Pyodide's imports from its own parse of the module; they
// must be exactly what wazero's definitions say.
func TestEngineImportsMatchWazero(t *testing.T) {
	e, err := loadEngine(context.Background(), Config{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	want := definitionsOf(e.main.ImportedFunctions())
	if len(e.imports) != len(want) || len(want) == 0 {
		t.Fatalf("%d imports from the parse, %d from wazero", len(e.imports), len(want))
	}
	for i, got := range e.imports {
		w := want[i]
		if got.Module != w.Module || got.Name != w.Name || !slices.Equal(got.Params, w.Params) || !slices.Equal(got.Results, w.Results) {
			t.Errorf("import %d: parsed %+v, wazero %+v", i, got, w)
		}
	}
}
