// Package exnref translates WebAssembly modules from the legacy
// exception-handling proposal (try, catch, catch_all, delegate, rethrow)
// to the standard exnref form (try_table, throw_ref), the only one wazero
// runs. It replaces binaryen's `wasm-opt --translate-to-exnref`.
//
// # What changes
//
// Only function bodies that use legacy instructions are rewritten; all
// other bytes, including the other sections, the other bodies and every
// instruction the translation does not touch, are copied as they are.
// A rewritten body may get exnref locals (appended after its other
// locals), and the type section may get function types for block types
// with parameters or several results. Tags are kept.
//
// Every instruction of every body is decoded (MVP, sign extension,
// saturating truncation, bulk memory, reference types, SIMD and relaxed
// SIMD, threads, multi-value, tail calls, typed function references, both
// exception-handling forms), so an unknown opcode is an error naming it and
// its function instead of a silent misreading. GC types are not supported.
//
// # The lowering
//
// Each legacy construct becomes blocks around a try_table (bt is the
// try's block type; t*_k are the values catch clause k delivers):
//
//	try bt                     block bt                         ;; $outer
//	                             block (result t*_n)            ;; clause n
//	                               ...
//	                                 block (result t*_1)        ;; clause 1
//	                                   try_table bt (catch $tag_1 0) ... (catch_all n-1)
//	  body                               body
//	                                   end
//	                                   br $outer
//	catch $tag_1                     end
//	  handler 1                      handler 1
//	                                 br $outer
//	...                            ...
//	catch_all                      end
//	  handler n                    handler n
//	end                          end
//
// A try without catches becomes a block. A clause whose handler holds a
// rethrow aimed at it uses catch_ref or catch_all_ref instead, and the
// handler starts by storing the exnref in a local; `rethrow N` becomes
// `local.get $exn; throw_ref`. Clauses that are active at the same time
// (one nested in the other's handler) get different locals; the others
// share them.
//
// `try bt body delegate N` hands the exceptions of body to the innermost
// try, at or outside label N, whose body (not handler) encloses the
// delegate, or to the caller if there is none. It becomes
//
//	block bt
//	  block (result exnref)
//	    try_table bt (catch_all_ref 0)
//	      body
//	    end
//	    br 1
//	  end
//	  br $target
//	end
//
// where $target is a `block (result exnref)` wrapped around the target
// try's body, inside its try_table, followed by `throw_ref`, so the
// exception is thrown again within the target's handlers. For the caller,
// $target wraps the whole function body: `block (result exnref) body return
// end throw_ref`.
//
// Parameters of a try are passed through all these blocks, which then need
// function types. Every branch, br_table and catch label is renumbered for
// the added blocks.
//
// # Shaped for wazero's compiler
//
// wazero 1.12's compiler pushes a handler when it enters a try_table and
// pops it at the try_table's end, on branches that cross the try_table,
// and when the try_table catches; it misses branches to the try_table's
// own label and catch clauses whose label is outside an enclosing
// try_table, leaving a stale handler that catches later exceptions. So
// every clause here targets the block right around its try_table, and no
// branch targets a try_table (exceptions travel on with br, which crosses
// try_tables properly). The same compiler shows the handler the locals as
// they were when the try_table was entered; no translation can fix that
// (see TestWazeroCompilerBugs).
package exnref
