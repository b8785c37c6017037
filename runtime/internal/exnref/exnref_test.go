package exnref

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// call is one call of an exported function and what it must do.
type call struct {
	fn      string
	args    []uint64
	want    []uint64 // results
	wantErr string   // substring of the error, instead of results
	log     []int32  // values passed to env.log, in order
}

var translateTests = []struct {
	name  string
	funcs []testFunc
	calls []call
	// compilerBug, when set, names a wazero compiler bug the case runs
	// into; the case then runs on the interpreter only.
	compilerBug string
}{
	{
		name: "catch with a value",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 7 throw 0
			catch 0
				i32.const 100 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{107}}},
	},
	{
		name: "catch with i32 and i64 values",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 5 i64.const 9 throw 1
			catch 0
				drop i32.const -1
			catch 1 ;; [i32 i64]
				i32.wrap_i64 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{14}}},
	},
	{
		name: "catch_all after unmatched catch",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 1 call 0
				throw 2
				i32.const 0
			catch 0
				drop i32.const -1
			catch_all
				i32.const 2 call 0
				i32.const 3
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{3}, log: []int32{1, 2}}},
	},
	{
		name: "no exception",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 1 call 0
				i32.const 4
			catch 0
				drop i32.const -1
			catch_all
				i32.const -2
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{4}, log: []int32{1}}},
	},
	{
		name: "nested try, inner does not match",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					i32.const 1 call 0
					i32.const 1 i64.const 2 throw 1
				catch 0
					drop i32.const 99 call 0
				end
				i32.const 0
			catch 1
				drop drop
				i32.const 2 call 0
				i32.const 42
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{42}, log: []int32{1, 2}}},
	},
	{
		name: "nested try, inner catches and the outer body goes on",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					i32.const 8 throw 0
				catch 0
					call 0
				end
				i32.const 9 call 0
				i32.const 5
			catch_all
				i32.const -1
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{5}, log: []int32{8, 9}}},
	},
	{
		name: "throw from a catch body goes to the enclosing try",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try i32
					i32.const 1 throw 0
				catch 0
					i32.const 1 i32.add throw 0
				catch_all
					i32.const 99
				end
			catch 0
				i32.const 80 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{82}}},
	},
	{
		name: "catch-less try",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try i32
					i32.const 3 throw 0
				end
			catch 0
				i32.const 10 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{13}}},
	},
	{
		name: "delegate to an outer try skips the try in between",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					try void
						i32.const 3 throw 0
					delegate 1 ;; 0: the try around, 1: the outer try
				catch_all
					i32.const 99 call 0
				end
				i32.const 0
			catch 0
				i32.const 10 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{13}}},
	},
	{
		name: "delegate 0 to the try around",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					try void
						i32.const 3 throw 0
					delegate 0
				catch_all
					i32.const 1 call 0
				end
				i32.const 0
			catch 0
				i32.const 10 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{0}, log: []int32{1}}},
	},
	{
		name: "delegate to a block goes to the try around the block",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				block void
					try void
						i32.const 4 throw 0
					delegate 0 ;; the block
				end
				i32.const 0
			catch 0
				i32.const 20 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{24}}},
	},
	{
		name: "delegate from a catch body to its own try goes further out",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					i32.const 1 throw 0
				catch 0
					drop
					try void
						i32.const 5 throw 0
					delegate 0 ;; the try whose catch this is
				catch_all
					i32.const 99 call 0
				end
				i32.const 0
			catch 0
				i32.const 30 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{35}}},
	},
	{
		name: "delegate to a delegating try",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					try void
						try void
							i32.const 6 throw 0
						delegate 0 ;; the delegating try
					delegate 1 ;; the outer try
				catch_all
					i32.const 99 call 0
				end
				i32.const 0
			catch 0
				i32.const 40 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{46}}},
	},
	{
		name: "delegate target without exception",
		funcs: []testFunc{{typ: 4, body: `
			try i32
				try void
					local.get 0 br_if 0 ;; skip the throw
					i32.const 3 throw 0
				delegate 0
				i32.const 7
			catch 0
				i32.const 10 i32.add
			end
			end`}},
		calls: []call{
			{fn: "f1", args: []uint64{1}, want: []uint64{7}},
			{fn: "f1", args: []uint64{0}, want: []uint64{13}},
		},
	},
	{
		name: "delegate to the caller",
		funcs: []testFunc{
			{typ: 4, body: `
				try void
					try void
						local.get 0 i32.eqz br_if 0
						i32.const 4 throw 0
					delegate 1 ;; the function: the caller
				catch_all
					i32.const 99 call 0
				end
				i32.const 5
				end`},
			{typ: 4, body: `
				try i32
					local.get 0 call 1
				catch 0
					i32.const 20 i32.add
				end
				end`},
		},
		calls: []call{
			{fn: "f2", args: []uint64{1}, want: []uint64{24}},
			{fn: "f2", args: []uint64{0}, want: []uint64{5}},
			{fn: "f1", args: []uint64{1}, wantErr: "uncaught exception"},
			{fn: "f1", args: []uint64{0}, want: []uint64{5}},
		},
	},
	{
		name: "delegate to the caller with a branch to the function label",
		funcs: []testFunc{{typ: 4, body: `
			block void
				try void
					local.get 0 local.get 0 br_if 2 ;; leaves the function with the param
					drop i32.const 4 throw 0
				delegate 1 ;; the function
			end
			i32.const 9
			end`}},
		calls: []call{
			{fn: "f1", args: []uint64{6}, want: []uint64{6}},
			{fn: "f1", args: []uint64{0}, wantErr: "uncaught exception"},
		},
	},
	{
		name: "rethrow 0",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					i32.const 6 throw 0
				catch_all
					i32.const 1 call 0
					rethrow 0
				end
				i32.const 0
			catch 0
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{6}, log: []int32{1}}},
	},
	{
		name: "rethrow 1 and rethrow 2 from nested handlers",
		funcs: []testFunc{{typ: 4, body: `
			try i32
				try void
					i32.const 1 throw 0
				catch 0
					drop
					try void
						i32.const 2 throw 0
					catch 0
						drop
						local.get 0
						if void
							rethrow 2 ;; 0: if, 1: inner catch, 2: outer catch
						else
							rethrow 1 ;; the inner catch
						end
					end
				end
				i32.const 0
			catch 0
				i32.const 40 i32.add
			end
			end`}},
		calls: []call{
			{fn: "f1", args: []uint64{1}, want: []uint64{41}},
			{fn: "f1", args: []uint64{0}, want: []uint64{42}},
		},
	},
	{
		name: "rethrow from a try body inside a catch",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 1 throw 0
			catch 0
				drop
				try i32
					rethrow 1 ;; 0: this try's body, 1: the catch
				catch 0
					i32.const 50 i32.add
				end
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{51}}},
	},
	{
		name: "rethrow of a tag with two values",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					i32.const 3 i64.const 4 throw 1
				catch 1
					i32.const 10 call 0
					drop drop
					rethrow 0
				end
				i32.const 0
			catch 1
				i32.wrap_i64 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{7}, log: []int32{10}}},
	},
	{
		name: "try with a parameter",
		funcs: []testFunc{{typ: 0, body: `
			i32.const 5
			try t4 ;; [i32] -> [i32]
				i32.const 1 i32.add
				throw 0
			catch 0
				i32.const 100 i32.add
			end
			i32.const 5
			try t4
				i32.const 2 i32.mul
			catch_all
				i32.const -1
			end
			i32.add
			end`}},
		calls: []call{{fn: "f1", want: []uint64{116}}},
	},
	{
		name: "delegate into a try with a parameter",
		funcs: []testFunc{{typ: 4, body: `
			local.get 0
			try t4
				try t4
					local.get 0 br_if 0
					throw 0
				delegate 0
			catch 0
				i32.const 200 i32.add
			catch_all
				i32.const -1
			end
			end`}},
		calls: []call{
			{fn: "f1", args: []uint64{0}, want: []uint64{200}},
			{fn: "f1", args: []uint64{3}, want: []uint64{3}},
		},
	},
	{
		name: "rethrow in a try with a parameter",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 6
				try t4
					throw 0
				catch 0
					drop rethrow 0
				end
			catch 0
				i32.const 1 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{7}}},
	},
	{
		name: "br out of a catch",
		funcs: []testFunc{{typ: 0, body: `
			block i32
				try i32
					i32.const 1 throw 0
				catch 0
					i32.const 60 i32.add
					br 1 ;; 0: the try, 1: the block
				end
				drop i32.const 0
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{61}}},
	},
	{
		name: "br 0 in a catch leaves the try",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 1 throw 0
			catch 0
				br 0
			catch_all
				i32.const 99
			end
			i32.const 70 i32.add
			end`}},
		calls: []call{{fn: "f1", want: []uint64{71}}},
	},
	{
		name: "br_table in a catch",
		funcs: []testFunc{{typ: 1, body: `
			block void
				block void
					try void
						local.get 0 throw 0
					catch 0
						br_table 2 0 1 2 ;; the try, the inner block, the outer block
					end
					i32.const 10 call 0
				end
				i32.const 11 call 0
			end
			i32.const 12 call 0
			end`}},
		calls: []call{
			{fn: "f1", args: []uint64{0}, log: []int32{10, 11, 12}},
			{fn: "f1", args: []uint64{1}, log: []int32{11, 12}},
			{fn: "f1", args: []uint64{2}, log: []int32{12}},
		},
	},
	{
		name: "loop around a try",
		funcs: []testFunc{{typ: 0, locals: "i32", body: `
			loop void
				try void
					local.get 0 i32.const 1 i32.add local.tee 0
					i32.const 3 i32.lt_s br_if 1 ;; the loop
					i32.const 0 throw 0
				catch_all
				end
			end
			local.get 0
			end`}},
		calls:       []call{{fn: "f1", want: []uint64{3}}},
		compilerBug: staleLocals,
	},
	{
		name: "loop around a try, the counter kept in the catch",
		funcs: []testFunc{{typ: 0, locals: "i32", body: `
			loop void
				try void
					local.get 0 i32.const 1 i32.add
					throw 0
				catch 0
					local.tee 0
					i32.const 3 i32.lt_s br_if 1 ;; the loop
				end
			end
			local.get 0
			end`}},
		calls: []call{{fn: "f1", want: []uint64{3}}},
	},
	{
		name: "a delegated exception leaves no handler behind",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					try void
						try void
							i32.const 1 throw 0
						delegate 1 ;; skips the try in between
					catch_all
						i32.const 99 call 0
					end
				catch_all
					i32.const 1 call 0
				end
				i32.const 5 throw 0 ;; for the outer try, not a stale handler
			catch 0
				i32.const 100 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{105}, log: []int32{1}}},
	},
	{
		name: "a branch out of a delegating try leaves no handler behind",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try void
					try void
						br 0 ;; the delegating try
					delegate 1 ;; the outer try
					i32.const 5 throw 0 ;; for the catch_all, not a stale handler
				catch_all
					i32.const 1 call 0
				end
				i32.const 6 throw 0
			catch 0
				i32.const 100 i32.add
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{106}, log: []int32{1}}},
	},
	{
		name: "try_table inside a legacy try",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				try_table void 1 0 0 0 ;; (catch 0 0): 0 is the legacy try
					i32.const 9 throw 0
				end
				i32.const 0
			catch_all
				i32.const -1
			end
			end`}},
		calls: []call{{fn: "f1", want: []uint64{9}}},
	},
	{
		name: "exception escapes to the caller",
		funcs: []testFunc{{typ: 0, body: `
			try i32
				i32.const 1 i64.const 1 throw 1
			catch 0
			end
			end`}},
		calls: []call{{fn: "f1", wantErr: "uncaught exception"}},
	},
}

// staleLocals is a bug of wazero 1.12's compiler: a catch handler sees the
// locals as they were when the try_table was entered (it restores a copy of
// the stack taken then), not as the try_table's body left them.
// TestWazeroCompilerBugs shows it on a module in the exnref form.
const staleLocals = "wazero 1.12 compiler: locals set in a try_table body are stale in its handlers"

func TestTranslate(t *testing.T) {
	engines := []struct {
		name string
		cfg  wazero.RuntimeConfig
	}{
		{"compiler", wazero.NewRuntimeConfigCompiler()},
		{"interpreter", wazero.NewRuntimeConfigInterpreter()},
	}
	for _, tc := range translateTests {
		t.Run(tc.name, func(t *testing.T) {
			in := buildModule(tc.funcs)
			if legacy, err := HasLegacy(in); err != nil || !legacy {
				t.Fatalf("HasLegacy(input) = %v, %v", legacy, err)
			}
			out, err := Translate(in)
			if err != nil {
				t.Fatal(err)
			}
			if legacy, err := HasLegacy(out); err != nil || legacy {
				t.Fatalf("HasLegacy(output) = %v, %v", legacy, err)
			}
			for _, e := range engines {
				t.Run(e.name, func(t *testing.T) {
					if e.name == "compiler" && tc.compilerBug != "" {
						t.Skip(tc.compilerBug)
					}
					runCalls(t, e.cfg, out, tc.calls)
				})
			}
		})
	}
}

func runCalls(t *testing.T, cfg wazero.RuntimeConfig, wasm []byte, calls []call) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCoreFeatures(api.CoreFeaturesV2|
		experimental.CoreFeaturesExceptionHandling|experimental.CoreFeaturesTailCall|
		experimental.CoreFeaturesExtendedConst))
	defer r.Close(ctx)
	var log []int32
	_, err := r.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func(v int32) { log = append(log, v) }).Export("log").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		log = nil
		got, err := mod.ExportedFunction(c.fn).Call(ctx, c.args...)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s%v: error %v, want %q", c.fn, c.args, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s%v: %v", c.fn, c.args, err)
		case !reflect.DeepEqual(got, c.want) && (len(got) > 0 || len(c.want) > 0):
			t.Errorf("%s%v = %v, want %v", c.fn, c.args, got, c.want)
		}
		if !reflect.DeepEqual(log, c.log) {
			t.Errorf("%s%v logged %v, want %v", c.fn, c.args, log, c.log)
		}
	}
}

func TestTranslateWithoutLegacy(t *testing.T) {
	in := buildModule([]testFunc{{typ: 0, body: `
		block i32
			try_table i32 1 0 0 0 ;; (catch 0 0)
				i32.const 9 throw 0
			end
		end
		end`}})
	out, err := Translate(in)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &in[0] || len(out) != len(in) {
		t.Error("Translate did not return its input")
	}
	if legacy, err := HasLegacy(in); err != nil || legacy {
		t.Errorf("HasLegacy = %v, %v", legacy, err)
	}
}

func TestTranslateErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"unknown opcode", "i32.const 0 0xff end", "function 2: exnref: malformed module: unknown opcode 0xff at offset 3"},
		{"unknown SIMD opcode", "0xfd 154 end", "unknown opcode 0xfd 0x9a"},
		{"unknown 0xfc opcode", "0xfc 18 end", "unknown opcode 0xfc 0x12"},
		{"rethrow outside catch", "try void rethrow 0 end end", "rethrow label 0 is not a catch"},
		{"catch outside try", "block void catch 0 end end", "catch outside try"},
		{"delegate label out of range", "try void delegate 1 end", "label 1 out of range"},
		{"br label out of range", "try void br 2 end end", "label 2 out of range"},
		{"unclosed", "try", "unexpected end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := buildModule([]testFunc{
				{typ: 3, body: "end"},
				{typ: 3, body: tc.body},
			})
			_, err := Translate(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrMalformed) {
				t.Errorf("Translate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRoundTrip checks that a module without legacy exception handling
// comes back byte for byte from decoding and re-encoding.
func TestRoundTrip(t *testing.T) {
	in := buildModule([]testFunc{
		{typ: 0, locals: "i32 i64", body: `
			block i32
				loop void
					local.get 0 i32.const 1 i32.add local.tee 0
					i32.const 300 i32.lt_s br_if 0
				end
				block void
					local.get 0 br_table 0 1 0
				end
				try_table i32 2 0 0 1 2 1 ;; (catch 0 1) (catch_all 1)
					i32.const -100000 i64.const 140737488355327 drop
				end
			end
			0xfd 12 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 ;; v128.const
			0xfd 21 3 ;; i8x16.extract_lane_s 3
			i32.add
			end`},
	})
	m, err := parseModule(in)
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLowering(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.emit(newTypeTable(m.types)); !bytes.Equal(got, m.bodies[0]) {
		t.Fatalf("body changed:\n got % x\nwant % x", got, m.bodies[0])
	}
	out, err := m.encode(m.bodies, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatal("module changed")
	}
}

// TestImportedTag catches an exception whose tag another module defines and
// throws: tag indices count imported tags first.
func TestImportedTag(t *testing.T) {
	code := func(bodies ...[]byte) []byte {
		s := appendU32(nil, uint32(len(bodies)))
		for _, b := range bodies {
			b = append([]byte{0}, b...) // no locals
			s = append(appendU32(s, uint32(len(b))), b...)
		}
		return s
	}
	name := func(b []byte, s string) []byte { return append(appendU32(b, uint32(len(s))), s...) }

	// Module a: tag t [i32] and throw7, which throws t(7).
	a := []byte("\x00asm\x01\x00\x00\x00")
	a = appendSection(a, secType, funcType{params: []string{"\x7f"}}.encode(funcType{}.encode([]byte{2})))
	a = appendSection(a, secFunction, []byte{1, 0})
	a = appendSection(a, secTag, []byte{1, 0, 1})
	exports := name([]byte{2}, "t")
	exports = append(exports, 4, 0)
	exports = name(exports, "throw7")
	exports = append(exports, 0, 0)
	a = appendSection(a, 7, exports)
	a = appendSection(a, secCode, code(asm("i32.const 7 throw 0 end")))

	// Module b imports both, defines a tag of its own and catches with
	// legacy try.
	b := []byte("\x00asm\x01\x00\x00\x00")
	types := appendU32(nil, 3)
	types = funcType{}.encode(types)                          // 0: [] -> []
	types = funcType{params: []string{"\x7f"}}.encode(types)  // 1: [i32] -> []
	types = funcType{results: []string{"\x7f"}}.encode(types) // 2: [] -> [i32]
	b = appendSection(b, secType, types)
	imports := name(name([]byte{2}, "a"), "throw7")
	imports = append(imports, 0, 0)
	imports = name(name(imports, "a"), "t")
	imports = append(imports, 4, 0, 1)
	b = appendSection(b, secImport, imports)
	b = appendSection(b, secFunction, []byte{1, 2})
	b = appendSection(b, secTag, []byte{1, 0, 1}) // tag 1: b's own
	b = appendSection(b, 7, append(name([]byte{1}, "f"), 0, 1))
	b = appendSection(b, secCode, code(asm(`
		try i32
			call 0 i32.const 0
		catch 1 ;; b's own tag: no match
			drop i32.const -1
		catch 0 ;; the imported tag
			i32.const 100 i32.add
		end
		end`)))

	out, err := Translate(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesExceptionHandling))
	defer r.Close(ctx)
	if _, err := r.InstantiateWithConfig(ctx, a, wazero.NewModuleConfig().WithName("a")); err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mod.ExportedFunction("f").Call(ctx)
	if err != nil || got[0] != 107 {
		t.Fatalf("f() = %v, %v, want 107", got, err)
	}
}
