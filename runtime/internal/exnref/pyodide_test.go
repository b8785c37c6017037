package exnref

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// pyodideVersion is the Pyodide release whose stock module the tests read.
const pyodideVersion = "314.0.7"

// stockPyodide returns the stock (legacy EH) pyodide.asm.wasm, or skips the
// test. It looks at $RLM_PYODIDE_STOCK_WASM, then at the build cache, where
// the file counts only if it still uses legacy exception handling.
func stockPyodide(t testing.TB) []byte {
	t.Helper()
	if p := os.Getenv("RLM_PYODIDE_STOCK_WASM"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("RLM_PYODIDE_STOCK_WASM: %v", err)
		}
		return b
	}
	p := filepath.Join(cacheDir(), "pyodide-npm-"+pyodideVersion, "pyodide.asm.wasm")
	if b, err := os.ReadFile(p); err == nil {
		if legacy, err := HasLegacy(b); err == nil && legacy {
			return b
		}
	}
	t.Skipf("no stock Pyodide %s module: set RLM_PYODIDE_STOCK_WASM to the pyodide.asm.wasm of `npm pack pyodide@%s` (%s is absent or already translated)",
		pyodideVersion, pyodideVersion, p)
	return nil
}

// cacheDir mirrors runtime.CacheDir, which this package cannot import.
func cacheDir() string {
	if d := os.Getenv("RLM_SANDBOX_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rlm-sandbox")
	}
	return filepath.Join(os.TempDir(), "rlm-sandbox")
}

func TestPyodide(t *testing.T) {
	stock := stockPyodide(t)
	start := time.Now()
	out, err := Translate(stock)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("translated %d bytes to %d in %v", len(stock), len(out), time.Since(start))
	if legacy, err := HasLegacy(out); err != nil || legacy {
		t.Fatalf("HasLegacy after Translate = %v, %v", legacy, err)
	}
	// The output does not depend on how the work was spread.
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	if again, err := Translate(stock); err != nil || !bytes.Equal(again, out) {
		t.Fatalf("Translate on one CPU differs (err %v)", err)
	}
	goruntime.GOMAXPROCS(4)
	if again, err := Translate(stock); err != nil || !bytes.Equal(again, out) {
		t.Fatalf("Translate on four CPUs differs (err %v)", err)
	}
	if testing.Short() {
		t.Skip("compiling Pyodide takes a while; skipped in -short mode")
	}
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2 |
		experimental.CoreFeaturesExceptionHandling | experimental.CoreFeaturesTailCall |
		experimental.CoreFeaturesExtendedConst | experimental.CoreFeaturesTypedFunctionReferences)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.Close(ctx)
	start = time.Now()
	cm, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compiled in %v", time.Since(start))
	if len(cm.ExportedFunctions()) == 0 {
		t.Fatal("no exported functions")
	}
}

// TestPyodideRoundTrip re-encodes every function of Pyodide that has no
// legacy exception handling through the lowering and checks the bytes are
// unchanged.
func TestPyodideRoundTrip(t *testing.T) {
	stock := stockPyodide(t)
	m, err := parseModule(stock)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := scanAll(m)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, l := range legacy {
		if l {
			continue
		}
		n++
		lw, err := newLowering(m, i)
		if err != nil {
			t.Fatalf("function %d: %v", i, err)
		}
		if got := lw.emit(newTypeTable(nil)); !bytes.Equal(got, m.bodies[i]) {
			t.Fatalf("function %d: round trip changed the body", i)
		}
	}
	t.Logf("%d functions without legacy EH round-trip, %d with", n, len(legacy)-n)
	out, err := m.encode(m.bodies, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, stock) {
		t.Fatal("re-encoding the module changed it")
	}
}

// ehStats counts, per function, the catch clauses of each kind and the
// throw_ref instructions of a module in the exnref form.
func ehStats(t *testing.T, wasm []byte) [][5]int {
	t.Helper()
	m, err := parseModule(wasm)
	if err != nil {
		t.Fatal(err)
	}
	stats := make([][5]int, len(m.bodies))
	for i, body := range m.bodies {
		_, _, code, err := localDecls(body)
		if err != nil {
			t.Fatal(err)
		}
		l := &lowering{m: m, body: body}
		d := decoder{reader{b: body, pos: code}}
		for !d.done() {
			switch in := d.next(); in.op {
			case opTryTable:
				tt, err := l.readTryTable(in)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range tt.clauses {
					stats[i][c.kind]++
				}
			case opThrowRef:
				stats[i][4]++
			}
		}
		if d.err != nil {
			t.Fatalf("function %d: %v", i, d.err)
		}
	}
	return stats
}

// TestPyodideMatchesBinaryen compares, function by function, the catch
// clauses and throw_refs of the translation with binaryen's
// (wasm-opt --translate-to-exnref), when the build cache holds binaryen's.
func TestPyodideMatchesBinaryen(t *testing.T) {
	stock := stockPyodide(t)
	p := filepath.Join(cacheDir(), "pyodide-"+pyodideVersion, "pyodide.asm.wasm")
	ref, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("no binaryen translation at %s", p)
	}
	if legacy, err := HasLegacy(ref); err != nil || legacy {
		t.Skipf("%s is not binaryen's translation", p)
	}
	out, err := Translate(stock)
	if err != nil {
		t.Fatal(err)
	}
	got, want := ehStats(t, out), ehStats(t, ref)
	if len(got) != len(want) {
		t.Fatalf("%d functions, binaryen has %d", len(got), len(want))
	}
	var total, totalRef [5]int
	for i := range got {
		for k := range got[i] {
			total[k] += got[i][k]
			totalRef[k] += want[i][k]
		}
		if got[i] != want[i] {
			t.Errorf("function %d: catch/catch_ref/catch_all/catch_all_ref/throw_ref %v, binaryen %v", i, got[i], want[i])
		}
	}
	t.Logf("catch/catch_ref/catch_all/catch_all_ref/throw_ref: %v, binaryen %v", total, totalRef)
}

func BenchmarkTranslatePyodide(b *testing.B) {
	stock := stockPyodide(b)
	b.SetBytes(int64(len(stock)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Translate(stock); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHasLegacyPyodide(b *testing.B) {
	stock := stockPyodide(b)
	b.SetBytes(int64(len(stock)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HasLegacy(stock); err != nil {
			b.Fatal(err)
		}
	}
}
