package exnref

import (
	"context"
	"runtime"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// TestWazeroCompilerBugs pins three exception-handling bugs of wazero
// 1.12's compiler, shown on modules already in the exnref form. The
// interpreter gets each case right. The compiler implements try_table by
// copying the stack on entry and restoring that copy when a clause
// catches; a handler is pushed on entry and popped by the try_table's end,
// by branches that cross it, and by the catch that restores it, but not:
//
//  1. stale locals: locals set in the body are seen by the handler with
//     the values they had on entry (the translation cannot help here);
//  2. a clause whose label is outside an enclosing try_table leaves that
//     try_table's handler in place;
//  3. a branch to the try_table's own label leaves its handler in place.
//
// A left handler catches later exceptions it should not see. Translate
// avoids 2 and 3 (every clause targets the block right around its
// try_table, and no branch targets a try_table). When this test fails,
// wazero has fixed a bug: drop what works around it.
func TestWazeroCompilerBugs(t *testing.T) {
	cases := []struct {
		name           string
		body           string
		locals         string
		want, compiler uint64
	}{
		{
			name:   "1 locals set in the body",
			locals: "i32",
			body: `
				block void
					try_table void 1 2 0 ;; (catch_all 0)
						i32.const 5 local.set 0
						i32.const 0 throw 0
					end
				end
				local.get 0
				end`,
			want: 5, compiler: 0,
		},
		{
			name: "2 clause past an enclosing try_table",
			body: `
				block i32
					try_table void 1 0 0 0 ;; (catch 0 0): to the i32 block
						block exnref
							block void
								try_table void 1 2 0 ;; (catch_all 0): to the void block
									try_table void 1 3 2 ;; (catch_all_ref 2): to the exnref block
										i32.const 7 throw 0
									end
								end
								i32.const 1 return
							end
							i32.const 2 return ;; the left handler catches the throw_ref
						end
						throw_ref
					end
					i32.const 3 return
				end
				end`,
			want: 7, compiler: 2,
		},
		{
			name: "3 branch to a try_table's label",
			body: `
				block i32
					try_table void 1 0 0 0 ;; (catch 0 0): to the i32 block
						block void
							try_table void 1 2 0 ;; (catch_all 0): to the void block
								br 0
							end
							i32.const 7 throw 0
						end
						i32.const 1 return ;; the left handler catches the throw
					end
					i32.const 2 return
				end
				end`,
			want: 7, compiler: 1,
		},
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no wazero compiler on " + runtime.GOARCH)
	}
	ctx := context.Background()
	for _, tc := range cases {
		wasm := buildModule([]testFunc{{typ: 0, locals: tc.locals, body: tc.body}})
		for _, compiler := range []bool{false, true} {
			cfg := wazero.NewRuntimeConfigInterpreter()
			if compiler {
				cfg = wazero.NewRuntimeConfigCompiler()
			}
			r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesExceptionHandling))
			_, err := r.NewHostModuleBuilder("env").
				NewFunctionBuilder().WithFunc(func(int32) {}).Export("log").
				Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := r.Instantiate(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			got, err := mod.ExportedFunction("f1").Call(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if compiler {
				want = tc.compiler
			}
			if got[0] != want {
				t.Errorf("%s (compiler %v): %d, want %d", tc.name, compiler, got[0], want)
			}
			r.Close(ctx)
		}
	}
}
