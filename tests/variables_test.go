package tests

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

func TestGetVariable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "ctx")
		exec(t, sb, `
n = None
t = True
f = False
i = -7
big = 2**100
neg_big = -(2**80)
fl = 2.5
s = "héllo"
b = b"\x00\xff"
l = [1, "two", 3.0]
tu = (1, (2, 3))
d = {"a": 1, "b": [True]}
nd = {1: "one", (2, 3): "pair"}
st = {1, 2}
fs = frozenset(["x"])
class Thing:
    def __repr__(self):
        return "<Thing 7>"
obj = Thing()
nested = {"k": [obj]}
cyc = [1]
cyc.append(cyc)
`)
		bigV, _ := new(big.Int).SetString("1267650600228229401496703205376", 10)
		negBig, _ := new(big.Int).SetString("-1208925819614629174706176", 10)
		cases := []struct {
			name string
			want any
		}{
			{"n", nil},
			{"t", true},
			{"f", false},
			{"i", int64(-7)},
			{"big", bigV},
			{"neg_big", negBig},
			{"fl", 2.5},
			{"s", "héllo"},
			{"b", []byte{0, 0xff}},
			{"l", []any{int64(1), "two", 3.0}},
			{"tu", []any{int64(1), []any{int64(2), int64(3)}}},
			{"d", map[string]any{"a": int64(1), "b": []any{true}}},
			{"nd", runtime.Dict{{Key: int64(1), Value: "one"}, {Key: []any{int64(2), int64(3)}, Value: "pair"}}},
			{"fs", runtime.Set{"x"}},
			{"obj", "<Thing 7>"},
			{"nested", map[string]any{"k": []any{"<Thing 7>"}}},
			{"cyc", []any{int64(1), "[1, [...]]"}},
			{"context", "ctx"},
		}
		ctx := context.Background()
		for _, c := range cases {
			got, found, err := sb.GetVariable(ctx, c.name)
			if err != nil || !found {
				t.Errorf("GetVariable(%s) = %v, %v, %v", c.name, got, found, err)
				continue
			}
			if bw, ok := c.want.(*big.Int); ok {
				if bg, ok := got.(*big.Int); !ok || bg.Cmp(bw) != 0 {
					t.Errorf("%s = %#v, want %v", c.name, got, bw)
				}
				continue
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s = %#v, want %#v", c.name, got, c.want)
			}
		}
		got, found, err := sb.GetVariable(ctx, "st")
		if s, ok := got.(runtime.Set); err != nil || !found || !ok || len(s) != 2 {
			t.Errorf("set: %#v %v %v", got, found, err)
		}
		got, found, err = sb.GetVariable(ctx, "no_such_name")
		if err != nil || found || got != nil {
			t.Errorf("missing name: %v %v %v", got, found, err)
		}
	})
}

func TestSetVariable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
		values := map[string]any{
			"a": int64(5), "b": "text", "c": []any{int64(1), "x", nil}, "d": map[string]any{"k": 1.5},
			"e": huge, "f": []byte("raw"), "g": true,
			// A Tuple is a tuple in both modes (a worker got a list), so
			// it can be a dict key.
			"h": runtime.Tuple{int64(1), "a", nil},
			"i": runtime.Dict{{Key: int64(1), Value: "a"}, {Key: runtime.Tuple{int64(1), runtime.Tuple{int64(2)}}, Value: "b"}},
			"j": []any{complex(1.5, -2), complex64(3i)},
		}
		for k, v := range values {
			if err := sb.SetVariable(ctx, k, v); err != nil {
				t.Fatalf("SetVariable(%s): %v", k, err)
			}
		}
		ce := exec(t, sb, "print(a+1, b.upper(), c, d['k']*2, e, f, g, h, i, j)")
		if want := "6 TEXT [1, 'x', None] 3.0 -123456789012345678901234567890 b'raw' True (1, 'a', None) {1: 'a', (1, (2,)): 'b'} [(1.5-2j), 3j]\n"; ce.Stdout != want {
			t.Fatalf("stdout %q, want %q", ce.Stdout, want)
		}
		if err := sb.SetVariable(ctx, "bad", make(chan int)); err == nil {
			t.Fatal("SetVariable of a channel: no error")
		}
	})
}

// textKey is a map key with its own text form, which encoding/json writes.
type textKey int

func (k textKey) MarshalText() ([]byte, error) { return []byte("k" + strconv.Itoa(int(k))), nil }

// A Go map with number or bool keys reaches Python with those keys, in
// ascending order; other keys arrive as their JSON text, as before.
func TestSetVariableMapKeys(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		values := map[string]any{
			"ints":   map[int]string{3: "c", -1: "a", 2: "b"},
			"uints":  map[uint64][]int{1 << 63: {1}, 0: nil},
			"floats": map[float64]bool{2.5: true, -0.5: false},
			"bools":  map[bool]map[int8]string{true: {1: "x"}, false: {}},
			"texts":  map[textKey]int{2: 20, 1: 10},
			"nans":   map[float64]int{math.NaN(): 1},
			"anys":   map[any]any{"b": 2, 1: "a", nil: true, 2.5: nil},
			"strs":   map[any]any{"x": 1},
			"bigs":   []any{*big.NewInt(7)},
		}
		for k, v := range values {
			if err := sb.SetVariable(ctx, k, v); err != nil {
				t.Fatalf("SetVariable(%s): %v", k, err)
			}
		}
		ce := exec(t, sb, "for v in (ints, uints, floats, bools, texts, nans, anys, strs, bigs): print(v, [type(k).__name__ for k in v])")
		want := "{-1: 'a', 2: 'b', 3: 'c'} ['int', 'int', 'int']\n" +
			"{0: [], 9223372036854775808: [1]} ['int', 'int']\n" +
			"{-0.5: False, 2.5: True} ['float', 'float']\n" +
			"{False: {}, True: {1: 'x'}} ['bool', 'bool']\n" +
			"{'k1': 10, 'k2': 20} ['str', 'str']\n" +
			"{nan: 1} ['float']\n" +
			"{None: True, 1: 'a', 2.5: None, 'b': 2} ['NoneType', 'int', 'float', 'str']\n" +
			"{'x': 1} ['str']\n" +
			"[7] ['int']\n"
		if ce.Stdout != want || ce.Error != "" {
			t.Fatalf("stdout %q (%s), want %q", ce.Stdout, ce.Error, want)
		}
		// A key Python cannot hash is an error, not a panic, and so are keys
		// Python would merge, keeping one by chance.
		if err := sb.SetVariable(ctx, "bad", map[any]any{[2]int{1, 2}: "t"}); err == nil || !strings.Contains(err.Error(), "dict key") {
			t.Fatalf("SetVariable of an array key: %v", err)
		}
		for _, dup := range []any{map[any]any{true: "T", 1: "one"}, map[any]any{1: "a", 1.0: "b"}, map[any]any{int8(7): "a", uint16(7): "b"}} {
			if err := sb.SetVariable(ctx, "bad", dup); err == nil || !strings.Contains(err.Error(), "one Python dict key") {
				t.Fatalf("SetVariable(%v): %v", dup, err)
			}
		}
		// A dict with tuple keys goes back in as GetVariable gave it (its
		// tuples as []any).
		exec(t, sb, "v = {(1, (2, 'x')): 'a', 3: 'b'}")
		got, _, err := sb.GetVariable(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.SetVariable(ctx, "w", got); err != nil {
			t.Fatalf("SetVariable(%#v): %v", got, err)
		}
		if ce := exec(t, sb, "print(w == v)"); ce.Stdout != "True\n" {
			t.Fatalf("round trip: %+v", ce)
		}
	})
}

// TestSetVariableNames: SetVariable refuses, with ErrInvalidName, a name
// that Python code could not use as a variable, and never one it could:
// the sandbox's own str.isidentifier() and keyword.iskeyword() judge each
// name (exactly for ASCII names; for others the host only refuses what is
// certainly not an identifier).
func TestSetVariableNames(t *testing.T) {
	names := []string{
		"x", "_", "__x__", "x1", "X_y", "match", "type", "case", "_1",
		"1x", "", "my var", "a-b", "a.b", "x\n", "x\x00", "$x", "x!", "class", "None", "True", "lambda", "await",
		"été", "变量", "Straße", "ǅx", "x\u0301", "x٣", "٣x", "x・y", "x\u200dy", "a\u00a0b", "x€", "x→y", "\u30fb",
		"\xffx", "x\xed\xa0\x80",
	}
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		refused := make([]bool, len(names))
		for i, n := range names {
			err := sb.SetVariable(ctx, n, 1)
			if err != nil && !errors.Is(err, supervisor.ErrInvalidName) {
				t.Fatalf("SetVariable(%q): %v", n, err)
			}
			refused[i] = err != nil
		}
		// The names as Python sees them (invalid UTF-8 cannot reach it:
		// the host must refuse those).
		var lits []string
		for i, n := range names {
			if !utf8.ValidString(n) {
				if !refused[i] {
					t.Errorf("SetVariable(%q), not UTF-8: accepted", n)
				}
				n = ""
			}
			lits = append(lits, strconv.Quote(n))
		}
		ce := exec(t, sb, "import keyword\nprint(''.join('1' if n.isidentifier() and not keyword.iskeyword(n) else '0' for n in ["+
			strings.Join(lits, ", ")+"]))")
		valid := strings.TrimSpace(ce.Stdout)
		for i, n := range names {
			if valid[i] == '1' && refused[i] {
				t.Errorf("SetVariable(%q) refused a name Python accepts", n)
			}
			ascii := strings.IndexFunc(n, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
			if valid[i] == '0' && !refused[i] && (ascii || n == "a\u00a0b" || n == "x€" || n == "x→y" || n == "\u30fb") {
				t.Errorf("SetVariable(%q) accepted a name Python refuses", n)
			}
		}
		if ce := exec(t, sb, "print(été + 变量)"); ce.Stdout != "2\n" {
			t.Errorf("names set: stdout %q", ce.Stdout)
		}
	})
}

// TestJSONOrderReachesPython checks, in both modes, that objects passed
// as JSON (json.RawMessage, structs) reach Python with their members in
// order, as json.loads would give them, through Initialize and
// SetVariable, and that a runtime.Dict of string keys keeps its order.
func TestJSONOrderReachesPython(t *testing.T) {
	type doc struct {
		Title string   `json:"title"`
		Body  string   `json:"body"`
		Tags  []string `json:"tags"`
	}
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		if err := sb.Initialize(ctx, json.RawMessage(`{"zeta": 1, "alpha": {"y": 2, "x": 3}, "mid": [{"b": 1, "a": 2}], "zeta": 4}`)); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]any{
			"d":  doc{Title: "t", Body: "b", Tags: []string{"x"}},
			"rd": runtime.Dict{{Key: "b", Value: int64(1)}, {Key: "a", Value: int64(2)}},
		} {
			if err := sb.SetVariable(ctx, name, v); err != nil {
				t.Fatalf("SetVariable(%s): %v", name, err)
			}
		}
		ce := exec(t, sb, "print(context)\nprint(d)\nprint(rd)")
		want := "{'zeta': 4, 'alpha': {'y': 2, 'x': 3}, 'mid': [{'b': 1, 'a': 2}]}\n" +
			"{'title': 't', 'body': 'b', 'tags': ['x']}\n{'b': 1, 'a': 2}\n"
		if ce.Stdout != want {
			t.Fatalf("stdout %q, want %q", ce.Stdout, want)
		}
	})
}

// TestKeepDictOrder checks Config.KeepDictOrder in both modes: a dict of
// str keys not in ascending order comes back as a runtime.Dict in its
// order (GetVariable, and rlm_query's ctx), one in ascending order as a
// map; without the option, as a map.
func TestKeepDictOrder(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		var ctxSeen any
		cfg := supervisor.Config{KeepDictOrder: true, OnRLMQuery: func(_ context.Context, _ string, c any) (string, error) {
			ctxSeen = c
			return "", nil
		}}
		sb := newSandbox(t, m, cfg, "")
		exec(t, sb, "d = {'b': 1, 'a': {'z': 0, 'y': [1]}}\ns = {'a': 1, 'b': 2}\nrlm_query('t', d)")
		want := runtime.Dict{{Key: "b", Value: int64(1)}, {Key: "a", Value: runtime.Dict{{Key: "z", Value: int64(0)}, {Key: "y", Value: []any{int64(1)}}}}}
		if v, _, err := sb.GetVariable(context.Background(), "d"); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("d = %#v (%v), want %#v", v, err, want)
		}
		if v, _, err := sb.GetVariable(context.Background(), "s"); err != nil || !reflect.DeepEqual(v, map[string]any{"a": int64(1), "b": int64(2)}) {
			t.Errorf("s = %#v (%v)", v, err)
		}
		if !reflect.DeepEqual(ctxSeen, want) {
			t.Errorf("rlm_query ctx = %#v, want %#v", ctxSeen, want)
		}
		plain := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, plain, "d = {'b': 1, 'a': 2}")
		if v, _, err := plain.GetVariable(context.Background(), "d"); err != nil || !reflect.DeepEqual(v, map[string]any{"a": int64(2), "b": int64(1)}) {
			t.Errorf("without KeepDictOrder: d = %#v (%v)", v, err)
		}
	})
}

func TestVariableEdgeValues(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "c = 1.5 - 2j\nbig = 'x' * (70 << 20)")
		v, found, err := sb.GetVariable(context.Background(), "c")
		if err != nil || !found || v != complex(1.5, -2) {
			t.Fatalf("complex: %v %v %#v", err, found, v)
		}
		// A value too large for one frame is an error, not a dead worker.
		v, _, err = sb.GetVariable(context.Background(), "big")
		if m.name == "worker" && (err == nil || !strings.Contains(err.Error(), "too large")) {
			t.Fatalf("70 MB variable: %v", err)
		}
		if m.name == "direct" && (err != nil || len(v.(string)) != 70<<20) {
			t.Fatalf("70 MB variable in direct mode: %v", err)
		}
		if ce := exec(t, sb, "print(len(big))"); ce.Stdout != "73400320\n" {
			t.Fatalf("after: %+v", ce)
		}
	})
}

// Empty bytes come back as an empty, non-nil []byte in both modes (direct
// mode gave nil).
func TestGetVariableEmptyBytes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		exec(t, sb, "e = b''\nl = [b'', bytearray()]")
		for _, name := range []string{"e", "l"} {
			v, _, err := sb.GetVariable(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			if l, ok := v.([]any); ok {
				v = l[0]
			}
			if b, ok := v.([]byte); !ok || b == nil || len(b) != 0 {
				t.Fatalf("%s: %#v, want []byte{}", name, v)
			}
		}
	})
}

// TestLargeValueCanceled: in a worker, the context ends a large value's
// Initialize or SetVariable while it is still being staged (it went on to
// set the value), and a context that has ended already stops the call
// before a large value is converted.
func TestLargeValueCanceled(t *testing.T) {
	sb := newSandbox(t, workerMode, supervisor.Config{}, "")
	big := strings.Repeat("x", 256<<20)
	bigMap := map[string]any{}
	for i := range 200_000 {
		bigMap[strconv.Itoa(i)] = []any{i, "v"}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range map[string]func(context.Context) error{
		"Initialize":  func(ctx context.Context) error { return sb.Initialize(ctx, big) },
		"SetVariable": func(ctx context.Context) error { return sb.SetVariable(ctx, "v", big) },
		"SetVariable of a map, canceled before": func(context.Context) error {
			return sb.SetVariable(done, "v", bigMap)
		},
	} {
		// 256 MB take far longer than a millisecond to stage.
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		err := call(ctx)
		cancel()
		if !errors.Is(err, supervisor.ErrCanceled) {
			t.Errorf("%s: %v, want ErrCanceled", name, err)
		}
		if ce := exec(t, sb, "print(len(context), 'v' in globals())"); ce.Stdout != "0 False\n" {
			t.Fatalf("after %s: %+v", name, ce)
		}
	}
}

// cancelOnMarshal is a value whose conversion calls Cancel: a Cancel that
// comes while a large value is converted, before anything of it has gone.
type cancelOnMarshal struct{ sb supervisor.Sandbox }

func (c cancelOnMarshal) MarshalJSON() ([]byte, error) {
	c.sb.Cancel()
	return []byte(`"x"`), nil
}

// TestValueCanceledWhileConverted: Cancel while SetVariable or Initialize
// converts its value (2,000,000 maps took seconds) ends the call with
// ErrCanceled, and nothing is set, in both modes (the Cancel did nothing,
// and the value was set); a Cancel before the call has no effect on it.
func TestValueCanceledWhileConverted(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "before")
		for name, call := range map[string]func(v any) error{
			"SetVariable": func(v any) error { return sb.SetVariable(context.Background(), "v", v) },
			"Initialize":  func(v any) error { return sb.Initialize(context.Background(), v) },
		} {
			err := call([]any{1, cancelOnMarshal{sb}, 3})
			if !errors.Is(err, supervisor.ErrCanceled) || !strings.Contains(err.Error(), "Cancel was called") {
				t.Errorf("%s: %v, want ErrCanceled", name, err)
			}
			if ce := exec(t, sb, "print(context, 'v' in globals())"); ce.Stdout != "before False\n" {
				t.Fatalf("after %s: %+v", name, ce)
			}
		}
		sb.Cancel()
		if err := sb.SetVariable(context.Background(), "v", []any{1, 2}); err != nil {
			t.Fatalf("SetVariable after a Cancel that came before it: %v", err)
		}
		if ce := exec(t, sb, "print(v)"); ce.Stdout != "[1, 2]\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

// TestCancelReachesTheRunningCall: a Cancel while an Execute runs is the
// Execute's: a SetVariable converting its value meanwhile, to run next,
// is left alone.
func TestCancelReachesTheRunningCall(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		inCallback := make(chan struct{})
		sb := newSandbox(t, m, supervisor.Config{OnLLMQuery: func(ctx context.Context, _ string) (string, error) {
			close(inCallback)
			<-ctx.Done()
			return "", ctx.Err()
		}}, "")
		done := make(chan error, 1)
		go func() {
			_, err := sb.Execute(context.Background(), "llm_query('wait')")
			done <- err
		}()
		<-inCallback
		if err := sb.SetVariable(context.Background(), "v", []any{1, cancelOnMarshal{sb}}); err != nil {
			t.Fatalf("SetVariable: %v", err)
		}
		if err := <-done; !errors.Is(err, supervisor.ErrCanceled) {
			t.Fatalf("Execute: %v, want ErrCanceled", err)
		}
		if ce := exec(t, sb, "print(v)"); ce.Stdout != "[1, 'x']\n" {
			t.Fatalf("%+v", ce)
		}
	})
}

// TestVariableNamesAsCodeSpellsThem: a name in another Unicode form than
// NFKC (fullwidth letters, a ligature) is the variable code reaches by
// it, as Python's parser normalises identifiers: it was a global no code
// could reach, and get_variable missed what code bound.
func TestVariableNamesAsCodeSpellsThem(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sb := newSandbox(t, m, supervisor.Config{}, "")
		ctx := context.Background()
		if err := sb.SetVariable(ctx, "ｆｕｌｌ", int64(1)); err != nil {
			t.Fatal(err)
		}
		if err := sb.SetVariable(ctx, "ｂｉｇ", strings.Repeat("é", 100_000)); err != nil { // the host-built str's path
			t.Fatal(err)
		}
		if ce := exec(t, sb, "print(full, ｆｕｌｌ, len(big))\nﬁle = 5"); ce.Error != "" || ce.Stdout != "1 1 100000\n" {
			t.Fatalf("%+v", ce)
		}
		for _, name := range []string{"file", "ﬁle"} {
			if v, found, err := sb.GetVariable(ctx, name); err != nil || !found || v != int64(5) {
				t.Fatalf("GetVariable(%q): %v %v %v", name, v, found, err)
			}
		}
	})
}
