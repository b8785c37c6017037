package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/pymarshal"
)

// PythonError is an exception raised by Python code.
type PythonError struct {
	Type      string // exception class name, e.g. "ZeroDivisionError"
	Message   string // str(exception)
	Traceback string // formatted traceback, no ANSI colour codes
	// Exit is set when the exception is a SystemExit (sys.exit, exit(),
	// or a subclass of SystemExit): what CPython's top level does with it.
	Exit *Exit
}

// Exit is what CPython does with a SystemExit that reaches the top level
// of a script: it writes Stderr (str(code) and a newline, for a code that
// is neither None nor an int; else nothing) and exits with Status (0 for
// None, an int's low 8 bits, 255 for an int that does not fit a C long,
// else 1).
type Exit struct {
	Status int
	Stderr string
}

func (e *PythonError) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// Output receives what Python writes to stdout and stderr, as it is written.
// Nil writers discard.
type Output struct {
	Stdout, Stderr io.Writer
}

// Result is what an Exec returns.
type Result struct {
	// Error is the exception the code raised, or nil.
	Error *PythonError
	// Duration is the wall time of the execution.
	Duration time.Duration
	// BridgeCalls counts the calls the code made to Config.Bridge.
	BridgeCalls int
}

// Value types that Get returns and Set accepts. Get converts:
//
//	None, bool            nil, bool
//	int                   int64, or *big.Int when it does not fit
//	float, complex        float64, complex128
//	str                   string
//	bytes, bytearray      []byte
//	list, tuple           []any (Set accepts Tuple to make a tuple)
//	set, frozenset        Set
//	dict, all keys str    map[string]any (keys in no order)
//	other dicts           Dict, in order
//	anything else         its repr() string
//
// Set accepts those, and a Dict of str keys too (kept in its order).
type (
	// Set is a Python set or frozenset.
	Set = pymarshal.Set
	// Tuple makes Set write a tuple rather than a list.
	Tuple = pymarshal.Tuple
	// Dict is a dict with some non-str keys, in order.
	Dict = pymarshal.Dict
	// Item is a key/value pair of a Dict.
	Item = pymarshal.Item
)

// Exec runs code in the interpreter's persistent __main__ namespace, writing
// its output to out as it is produced. An exception in the code is reported
// in Result.Error, not as an error; errors are for the interpreter itself
// (closed, dead) and for bad arguments. When ctx is done while code runs,
// KeyboardInterrupt is raised in it.
//
// Before the code runs, the RLM helpers (llm_query, rlm_query, their
// batched forms, chunk_text, search_context, BridgeError) are bound again
// in __main__, so code that rebound one of them cannot break later
// executions.
func (in *Interpreter) Exec(ctx context.Context, code string, out Output) (*Result, error) {
	return in.exec(ctx, code, false, out)
}

// ExecInteractive is Exec the way Python's interactive prompt runs code:
// when the last statement is an expression, its value is shown with
// sys.displayhook (its repr on stdout unless it is None) and bound to _.
func (in *Interpreter) ExecInteractive(ctx context.Context, code string, out Output) (*Result, error) {
	return in.exec(ctx, code, true, out)
}

func (in *Interpreter) exec(ctx context.Context, code string, interactive bool, out Output) (*Result, error) {
	name := cellName(in.cells.Add(1))
	// The host runs the cell itself (fastexec.go) when the interpreter has
	// the fast path and compile() takes the code as it passes it.
	fast := in.fastObj.Globals != 0 && fastable(code)
	var req []byte
	if !fast {
		var err error
		if req, err = pymarshal.Encode(pymarshal.Tuple{"exec", code, interactive, name}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	refused := in.host.MemoryRefused()
	var calls int
	var reply any
	var err error
	if fast {
		reply, err = in.serve(ctx, out, &calls, func() (bool, error) {
			return in.runFast(in.fastPath(), code, name, interactive)
		})
	} else {
		reply, err = in.requestRaw(ctx, req, nil, out, &calls)
	}
	d := time.Since(start)
	if in.deadErr == nil && !in.closed.Load() {
		in.retain(name, len(code)) // whatever came of it, the source is kept
	}
	if err != nil {
		return nil, err
	}
	in.execs.Add(1)
	t, ok := reply.([]any)
	if !ok || len(t) == 0 {
		return nil, fmt.Errorf("runtime: malformed reply %v", reply)
	}
	res := &Result{Duration: d, BridgeCalls: calls}
	if code, _ := t[0].(int64); code == 1 && (len(t) == 4 || len(t) == 5) {
		pe := &PythonError{}
		pe.Type, _ = t[1].(string)
		pe.Message, _ = t[2].(string)
		pe.Traceback, _ = t[3].(string)
		if len(t) == 5 { // a SystemExit's (status, stderr)
			if x, ok := t[4].([]any); ok && len(x) == 2 {
				status, _ := x[0].(int64)
				stderr, _ := x[1].(string)
				pe.Exit = &Exit{Status: int(status), Stderr: stderr}
			}
		}
		res.Error = pe
	}
	// The bootstrap lets go of a reserve of memory on a MemoryError (so
	// that the next cell can run, a del say); it takes it again after
	// the first cell that runs without error. A cell that ran out of
	// memory and caught the MemoryError (or raised another exception)
	// may keep what filled the memory just the same: the host asks the
	// bootstrap to let go of the reserve then.
	switch {
	case res.Error != nil && res.Error.Type == "MemoryError":
		in.reserveSpent.Store(true)
	case in.host.MemoryRefused() != refused:
		// Also after an interrupted cell. A MemoryError serving it lets go
		// of the reserve too, which serveLocked records.
		if !in.reserveSpent.Load() {
			if _, err := in.request(context.WithoutCancel(ctx), spendRequest, Output{}); err == nil {
				in.reserveSpent.Store(true)
			}
		}
	case res.Error == nil && in.reserveSpent.Load():
		if v, err := in.request(ctx, rearmRequest, Output{}); err == nil {
			if t, ok := v.([]any); ok && len(t) == 1 && t[0] == true {
				in.reserveSpent.Store(false)
			}
		}
	}
	return res, nil
}

// IsComplete reports whether source is complete Python input, as the
// interactive prompt decides between ">>>" and "...": false means more
// lines are needed. Input with a syntax error counts as complete.
func (in *Interpreter) IsComplete(ctx context.Context, source string) (bool, error) {
	req, err := pymarshal.Encode(pymarshal.Tuple{"complete", source})
	if err != nil {
		return false, err
	}
	reply, err := in.request(ctx, req, Output{})
	if err != nil {
		return false, err
	}
	t, ok := reply.([]any)
	if !ok || len(t) != 1 {
		return false, fmt.Errorf("runtime: malformed reply %v", reply)
	}
	return t[0] == true, nil
}

// Executions counts the Exec and ExecInteractive calls that ran code.
func (in *Interpreter) Executions() int64 { return in.execs.Load() }

// Get returns the value of the global name of __main__, converted to Go
// as the comment of the Value types (Set, Tuple, Dict) says; objects of
// other types come back as their repr() string. found is false when there is no such global.
func (in *Interpreter) Get(ctx context.Context, name string) (v any, found bool, err error) {
	req, err := pymarshal.Encode(pymarshal.Tuple{"get", name})
	if err != nil {
		return nil, false, err
	}
	reply, err := in.request(ctx, req, Output{})
	if err != nil {
		return nil, false, err
	}
	t, ok := reply.([]any)
	if !ok || len(t) == 0 {
		return nil, false, fmt.Errorf("runtime: malformed reply %v", reply)
	}
	if t[0] == int64(0) {
		return nil, false, nil
	}
	if len(t) != 2 {
		return nil, false, fmt.Errorf("runtime: malformed reply %v", reply)
	}
	return t[1], true, nil
}

// Set binds the global name of __main__ to v converted to Python.
func (in *Interpreter) Set(ctx context.Context, name string, v any) error {
	return in.set(ctx, "set", name, v)
}

// SetContext binds the global `context` to v converted to Python, and makes
// v the text search_context searches (a value that is not a str is
// searched as its JSON text). Later executions may rebind `context`;
// search_context still searches the value set here.
func (in *Interpreter) SetContext(ctx context.Context, v any) error {
	return in.set(ctx, "ctx", "context", v)
}

// rawTextMin is the size from which a string crosses to the guest as raw
// bytes after the request instead of inside its marshal data.
const rawTextMin = 64 << 10

func (in *Interpreter) set(ctx context.Context, op, name string, v any) error {
	var req, raw []byte
	var err error
	if s, ok := v.(string); ok && len(s) >= rawTextMin {
		target := name
		if op == "ctx" {
			target = ""
		}
		if err := in.setLarge(ctx, target, s); err != errNoDirectText {
			return err
		}
		// The channel reads the string's bytes in place: no copy of a
		// large text is made on the Go side.
		raw = unsafe.Slice(unsafe.StringData(s), len(s))
		req, err = pymarshal.Encode(pymarshal.Tuple{op + "-text", name, int64(len(s))})
	} else {
		req, err = pymarshal.Encode(pymarshal.Tuple{op, name, v})
	}
	if err != nil {
		return err
	}
	_, err = in.requestRaw(ctx, req, raw, Output{}, nil)
	return err
}

// setLarge builds a large str in the guest directly (text.go), or returns
// errNoDirectText.
func (in *Interpreter) setLarge(ctx context.Context, name, s string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	defer in.recordMemorySize()
	if in.closed.Load() {
		return ErrClosed
	}
	if in.deadErr != nil {
		return in.deadErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return in.setTextDirect(ctx, name, s)
}

// RequestError reports a request the guest could not carry out, for
// example a MemoryError while receiving a large value; the interpreter is
// still usable.
type RequestError struct{ Type, Message string }

func (e *RequestError) Error() string {
	if e.Type == "MemoryError" {
		what := "MemoryError"
		if e.Message != "" { // usually empty
			what += ": " + e.Message
		}
		return "runtime: the interpreter ran out of memory serving the request (" + what +
			"): what it holds and the request need more than MemoryLimit allows (an idle interpreter holds about 30 MB)"
	}
	return "runtime: the interpreter could not serve the request: " + e.Type + ": " + e.Message
}

// ErrInterrupted is returned when a request was interrupted before the
// guest could answer (the interrupt arrived outside user code).
var ErrInterrupted = errors.New("runtime: interrupted")

func (in *Interpreter) request(ctx context.Context, req []byte, out Output) (any, error) {
	return in.requestRaw(ctx, req, nil, out, nil)
}

// requestRaw sends a request followed by raw bytes it announces, and
// stores in calls the number of bridge calls made while serving it.
func (in *Interpreter) requestRaw(ctx context.Context, req, raw []byte, out Output, calls *int) (any, error) {
	return in.serve(ctx, out, calls, in.bootstrapRun(req, raw))
}

// bootstrapRun is the run of serveLocked that has the bootstrap serve a
// request followed by raw bytes it announces.
func (in *Interpreter) bootstrapRun(req, raw []byte) func() (bool, error) {
	return func() (bool, error) {
		in.channel.reset(req, raw)
		return false, in.callRun()
	}
}

// serve is serveLocked under the interpreter's lock, and stores in calls
// the number of bridge calls made while serving.
func (in *Interpreter) serve(ctx context.Context, out Output, calls *int, run func() (bool, error)) (any, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	defer in.recordMemorySize()
	in.bridgeCalls = 0
	v, err := in.serveLocked(ctx, out, run)
	if calls != nil {
		*calls = in.bridgeCalls
	}
	return v, err
}

func (in *Interpreter) requestLocked(ctx context.Context, req, raw []byte, out Output) (any, error) {
	return in.serveLocked(ctx, out, in.bootstrapRun(req, raw))
}

// The bootstrap keeps each cell's source, for tracebacks, linecache and
// inspect (functions defined in a cell show their lines), and the lines
// of a cell a traceback went through once more, in linecache: forever,
// they were (a cell with a 1 MiB literal pinned 1 MiB, 2 if it raised,
// whatever the code deleted). Past keptSourceBytes of sources, the oldest
// cells' are let go of, the latest never: a traceback through a function
// of such a cell shows its file and line number without the line.
const keptSourceBytes = 16 << 20

type keptSources struct {
	mu    sync.Mutex
	names []string
	sizes []int
	total int
}

// retain records that the bootstrap keeps the source of the cell name,
// size bytes long, and has it forget the oldest past keptSourceBytes.
func (in *Interpreter) retain(name string, size int) {
	k := &in.kept
	k.mu.Lock()
	k.names, k.sizes = append(k.names, name), append(k.sizes, size)
	k.total += size
	var forget []any
	for k.total > keptSourceBytes && len(k.names) > 1 {
		forget = append(forget, k.names[0])
		k.total -= k.sizes[0]
		k.names, k.sizes = k.names[1:], k.sizes[1:]
	}
	k.mu.Unlock()
	if forget == nil {
		return
	}
	req, err := pymarshal.Encode(append(pymarshal.Tuple{"forget"}, forget...))
	if err == nil {
		// Not under the caller's ctx, which a time limit may have ended:
		// the names are no longer counted (a failure keeps the sources, no
		// worse than before).
		_, _ = in.request(context.Background(), req, Output{})
	}
}

// lostChannel is the error of a request whose code closed, or replaced,
// the descriptors of the bootstrap's channels to the host.
const lostChannel = "the code closed or replaced the descriptors of the sandbox's own channels to the host (3 to 5): the result of this code is lost (they are open again for the next)"

// okReply is the reply of an execution that raised nothing.
var okReply = []any{int64(0)}

// serveLocked serves a request: run calls into the guest, and reports
// whether the request completed with okReply; otherwise the reply is the
// one the guest wrote to the channel.
func (in *Interpreter) serveLocked(ctx context.Context, out Output, run func() (bool, error)) (any, error) {
	if in.closed.Load() {
		return nil, ErrClosed
	}
	if in.deadErr != nil {
		return nil, in.deadErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { in.intr.Swap(SIGINT) })
	in.host.SetOutput(out.Stdout, out.Stderr)
	in.reqCtx = ctx
	in.clock.begin()
	ok, err := run()
	in.clock.end()
	in.host.RestoreStdio()
	lost := in.host.RestoreKept()
	in.endBridgeCtx()
	in.reqCtx = nil
	in.channel.clear()
	interrupted := !stop()
	in.host.SetOutput(nil, nil)
	if in.closed.Load() {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	if interrupted || in.intr.Load() != 0 {
		in.drainSignals()
	}
	if ok {
		return okReply, nil
	}
	if len(in.channel.resp) == 0 {
		// The request did not complete: an interrupt hit the bootstrap code
		// around the user's code, and PyRun_SimpleString printed it.
		if interrupted {
			return nil, fmt.Errorf("%w: %w", ErrInterrupted, context.Cause(ctx))
		}
		if lost {
			// Or the code closed the bootstrap's channel, and the reply
			// went nowhere: the cell's error says so (it read as an
			// interrupt). The descriptors are back for the next request.
			return []any{int64(1), "OSError", lostChannel, "OSError: " + lostChannel + "\n"}, nil
		}
		return nil, ErrInterrupted
	}
	v, err := in.decode(in.channel.resp) // copies what it keeps
	in.channel.dropLarge()
	if err != nil {
		return nil, fmt.Errorf("runtime: decode reply: %w", err)
	}
	if t, ok := v.([]any); ok && len(t) == 3 && t[0] == int64(2) {
		// The request itself failed in the guest (not the user's code),
		// e.g. MemoryError while receiving it.
		if t[1] == "KeyboardInterrupt" {
			return nil, ErrInterrupted
		}
		if t[1] == "MemoryError" {
			in.reserveSpent.Store(true) // the bootstrap let go of it
		}
		return nil, &RequestError{Type: fmt.Sprint(t[1]), Message: fmt.Sprint(t[2])}
	}
	return v, nil
}

// callRun calls _rlm.run(), which serves the request loaded in the channel.
// An exception escaping it (an interrupt that hit the bootstrap code around
// the user's code) is cleared: the channel then holds no reply.
func (in *Interpreter) callRun() error {
	res, err := in.call(in.killCtx, in.fns.callNoArgs, uint64(in.runFn))
	if err != nil {
		return err
	}
	if res[0] == 0 {
		_, err = in.call(in.killCtx, in.fns.errClear)
		return err
	}
	_, err = in.call(in.killCtx, in.fns.decRef, res[0])
	return err
}

// drainSignals drops an interrupt that arrived too late to be delivered, so
// that it does not hit the next request.
func (in *Interpreter) drainSignals() {
	in.intr.Swap(0)
	if res, err := in.call(in.killCtx, in.fns.checkSignals); err == nil && int32(res[0]) != 0 && in.fns.errClear != nil {
		_, _ = in.call(in.killCtx, in.fns.errClear)
	}
}

// rearmRequest asks the bootstrap to take its memory reserve again, and
// spendRequest to let go of it.
var (
	rearmRequest, _ = pymarshal.Encode(pymarshal.Tuple{"rearm"})
	spendRequest, _ = pymarshal.Encode(pymarshal.Tuple{"spend"})
)

// decode reads a value the guest sent, keeping dicts' order when the
// configuration asks for it (Config.KeepDictOrder).
func (in *Interpreter) decode(b []byte) (any, error) {
	if in.keepDictOrder {
		return pymarshal.DecodeOrdered(b)
	}
	return pymarshal.Decode(b)
}
