package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/pymarshal"
	"github.com/tetratelabs/wazero/api"
)

// The fast path of Exec. The bootstrap's request path (read the request,
// unmarshal it, dispatch it, bind the helpers, compile, run, flush the
// streams, marshal the reply, write it) is all Python, and between two
// requests the host's work evicts its code and data from the processor's
// caches: the Python around compile() and exec() cost a one-line cell
// about 20 of its 86 µs (in process, without bounds checks; RATIONALE.md,
// "The host runs a plain cell itself"). So the host runs a plain cell
// itself, through CPython's C API, a dozen calls with no Python frame of
// the bootstrap's: it binds the helpers (PyDict_Update), records the
// cell's source for tracebacks, compiles it as compile(src, name, "exec",
// dont_inherit=True) does, runs it in __main__ as exec() does, and
// flushes a stream only when the bootstrap's flush would. When the cell
// raises, the bootstrap's fail() formats and sends the reply as its
// execute() does. An interactive cell is the same but for compile and
// exec: the host calls the bootstrap's run_interactive, which does them
// with the ast module. Sources compile() treats apart (NUL bytes, text
// that is not UTF-8) take the bootstrap's path.

// fastObjects are the guest's objects the fast path uses, by address, in
// the order of boot.py's fast tuple. The interpreter holds a reference to
// each (taken once, kept by boot snapshots).
type fastObjects struct {
	Globals, Helpers, Sources uint32 // __main__.__dict__, the helpers, the cells' sources
	Stdout, Stderr            uint32 // the streams the bootstrap found
	Fail, Flush               uint32 // the bootstrap's fail(e) and flush()
	WriteThrough, True        uint32 // "write_through", True
	BuiltinsName, Builtins    uint32 // "__builtins__", the builtins module
	None                      uint32
	Interactive               uint32 // the bootstrap's run_interactive(src, name)
	Closed, False             uint32 // "closed", False
	Awaited                   uint32 // the bootstrap's awaited(coro)
}

// fastFuncs are the C API functions of the fast path.
var fastFuncs = []string{
	"PyUnicode_FromStringAndSize", "PyDict_SetItem", "PyDict_Update", "PyDict_SetDefault",
	"Py_CompileStringObject", "PyEval_EvalCode", "PySys_GetObject", "PyObject_GetAttr",
	"PyObject_CallOneArg", "PyErr_GetRaisedException", "PyErr_NoMemory", "Py_IncRef",
	"PyObject_Vectorcall",
}

type fastFns struct {
	str, dictSet, dictUpdate, dictSetDefault, compile, eval, sysGet, getAttr, call1, raised, noMemory, vectorcall api.Function
}

// fastState is an interpreter's fast path: its objects, functions and
// scratch buffer.
type fastState struct {
	obj fastObjects
	fn  fastFns
	buf uint32 // guest buffer: header (fastHeader bytes), then the source
	cap uint32 // its size
}

// The scratch buffer's header.
const (
	fastFlags  = 0  // PyCompilerFlags {cf_flags, cf_feature_version}
	fastStdout = 8  // "stdout\0"
	fastStderr = 16 // "stderr\0"
	fastArgs   = 24 // the arguments of a vectorcall (two pointers)
	fastName   = 32 // the cell's name (at most 47 bytes)
	fastHeader = 80
	// A buffer grown past fastKeep for a large cell is freed after it.
	fastKeep = 1 << 20
	// compile()'s flags for a str source, PyCF_SOURCE_IS_UTF8 |
	// PyCF_IGNORE_COOKIE, and the bootstrap's top_level_await,
	// PyCF_ALLOW_TOP_LEVEL_AWAIT.
	cfFlags = 0x0100 | 0x0800 | 0x2000
	// Py_file_input and Py_single_input: compile()'s "exec" and "single".
	pyFileInput   = 257
	pySingleInput = 256
)

// loadFast sets up the fast path on a booted interpreter (not a restored
// one: the snapshot carries the addresses). Without it, every cell takes
// the bootstrap's path.
func (in *Interpreter) loadFast(ctx context.Context) error {
	if !in.hasFuncs(fastFuncs) {
		return nil
	}
	req, _ := pymarshal.Encode(pymarshal.Tuple{"fast"})
	v, err := in.requestLocked(ctx, req, nil, Output{})
	if err != nil {
		return fmt.Errorf("runtime: fast path: %w", err)
	}
	t, ok := v.([]any)
	if !ok || len(t) != 16 {
		return fmt.Errorf("runtime: fast path: malformed reply %v", v)
	}
	a := make([]uint32, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n <= 0 || n > 1<<32-1 {
			return fmt.Errorf("runtime: fast path: malformed address %v", x)
		}
		a[i] = uint32(n)
		if _, err := in.call(ctx, in.fn("Py_IncRef"), uint64(n)); err != nil {
			return err
		}
	}
	in.fastObj = fastObjects{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]}
	return nil
}

// fastPath returns the interpreter's fast path, or nil when it has none.
func (in *Interpreter) fastPath() *fastState {
	if in.fast != nil || in.fastObj.Globals == 0 {
		return in.fast
	}
	in.fast = &fastState{obj: in.fastObj, fn: fastFns{
		str: in.fn("PyUnicode_FromStringAndSize"), dictSet: in.fn("PyDict_SetItem"),
		dictUpdate: in.fn("PyDict_Update"), dictSetDefault: in.fn("PyDict_SetDefault"),
		compile: in.fn("Py_CompileStringObject"), eval: in.fn("PyEval_EvalCode"),
		sysGet: in.fn("PySys_GetObject"), getAttr: in.fn("PyObject_GetAttr"),
		call1: in.fn("PyObject_CallOneArg"), raised: in.fn("PyErr_GetRaisedException"),
		noMemory: in.fn("PyErr_NoMemory"), vectorcall: in.fn("PyObject_Vectorcall"),
	}}
	return in.fast
}

// fastable reports whether compile() takes code as the fast path passes
// it: a C string of UTF-8.
func fastable(code string) bool {
	return utf8.ValidString(code) && strings.IndexByte(code, 0) < 0
}

// runFast runs code as the cell name (as the interactive prompt does when
// interactive) and reports whether it ran without an exception. When it
// raised, the bootstrap's reply is in the channel (none when an interrupt
// hit the bootstrap as it replied); err is for the interpreter itself.
func (in *Interpreter) runFast(f *fastState, code, name string, interactive bool) (ok bool, err error) {
	in.channel.reset(nil, nil) // the reply of a cell that raises
	// The source, and for an interactive cell room for its two parts
	// (runSplit): they and the newlines before the second take at most
	// twice the cell.
	need := uint64(len(code)) + 1
	if interactive {
		need += 2*uint64(len(code)) + 2
	}
	if err := f.ensure(in, need); err != nil {
		return false, err
	}
	if f.buf == 0 {
		_, err := f.call(in, f.fn.noMemory)
		return in.fastFail(f, err)
	}
	if f.cap > fastKeep {
		defer f.release(in)
	}
	mem := in.main.Memory()
	src := f.buf + fastHeader
	b, _ := mem.Read(src, uint32(len(code))+1)
	copy(b, code)
	b[len(code)] = 0
	b, _ = mem.Read(f.buf+fastName, uint32(len(name)))
	copy(b, name)

	nameObj, err := f.call(in, f.fn.str, uint64(f.buf+fastName), uint64(len(name)))
	if err != nil || nameObj == 0 {
		return in.fastFail(f, err)
	}
	defer in.decRef(nameObj)
	srcObj, err := f.call(in, f.fn.str, uint64(src), uint64(len(code)))
	if err != nil || srcObj == 0 {
		return in.fastFail(f, err)
	}
	r, err := f.call(in, f.fn.dictSet, uint64(f.obj.Sources), nameObj, srcObj)
	in.decRef(srcObj) // sources holds it: srcObj stays valid below
	if err != nil || int32(r) != 0 {
		return in.fastFail(f, err)
	}
	// g.update(helpers); exec() also puts __builtins__ back when code
	// deleted it.
	if r, err := f.call(in, f.fn.dictUpdate, uint64(f.obj.Globals), uint64(f.obj.Helpers)); err != nil || int32(r) != 0 {
		return in.fastFail(f, err)
	}
	if r, err := f.call(in, f.fn.dictSetDefault, uint64(f.obj.Globals), uint64(f.obj.BuiltinsName), uint64(f.obj.Builtins)); err != nil || r == 0 {
		return in.fastFail(f, err)
	}
	if interactive {
		if ok, done, err := in.runSplit(f, code, nameObj); done || err != nil {
			return ok, err
		}
		// The bootstrap's ast-based run_interactive(src, name).
		mem.WriteUint32Le(f.buf+fastArgs, uint32(srcObj))
		mem.WriteUint32Le(f.buf+fastArgs+4, uint32(nameObj))
		res, err := f.call(in, f.fn.vectorcall, uint64(f.obj.Interactive), uint64(f.buf+fastArgs), 2, 0)
		if err != nil || res == 0 {
			return in.fastFail(f, err)
		}
		in.decRef(res)
		return true, in.fastFlush(f)
	}
	codeObj, err := f.compile(in, src, nameObj, pyFileInput)
	if err != nil || codeObj == 0 {
		return in.fastFail(f, err)
	}
	defer in.decRef(codeObj)
	if raised, err := in.fastEval(f, codeObj); raised || err != nil {
		return in.fastFail(f, err)
	}
	return true, in.fastFlush(f)
}

// compile compiles the C string at src as the cell nameObj in mode, as
// compile(src, name, mode, dont_inherit=True) does: a new reference, or
// 0 with the exception set.
func (f *fastState) compile(in *Interpreter, src uint32, nameObj, mode uint64) (uint64, error) {
	return f.call(in, f.fn.compile, uint64(src), nameObj, mode, uint64(f.buf+fastFlags), uint64(^uint32(0)))
}

// fastEval runs a code object in __main__, as the bootstrap's run_code
// does, and reports whether it raised (the exception then set). A cell's
// code returns None, or, when it awaits at its top level, a coroutine,
// which the bootstrap's awaited() runs.
func (in *Interpreter) fastEval(f *fastState, codeObj uint64) (raised bool, err error) {
	res, err := f.call(in, f.fn.eval, codeObj, uint64(f.obj.Globals), uint64(f.obj.Globals))
	if err != nil || res == 0 {
		return res == 0, err
	}
	if uint32(res) == f.obj.None {
		return false, nil
	}
	r, err := f.call(in, f.fn.call1, uint64(f.obj.Awaited), res)
	in.decRef(res)
	if err != nil || r == 0 {
		return r == 0, err
	}
	in.decRef(r)
	return false, nil
}

// runSplit runs an interactive cell as two code objects, when splitCell
// can split it: the statements before the last, compiled as compile()
// does, and the last, compiled for the prompt's display ("single") unless
// it is a compound statement. That is what the bootstrap's
// run_interactive does, without the round trip through Python's ast
// objects, which costs more than the compilation. done is false, and
// nothing ran, when a part does not compile (a syntax error, or a split in
// the wrong place): the caller then takes run_interactive, which reports
// the error as compile() would.
func (in *Interpreter) runSplit(f *fastState, code string, nameObj uint64) (ok, done bool, err error) {
	if strings.Contains(code, "await") || strings.Contains(code, "async") {
		// A cell that may await at its top level runs its two parts in
		// one event loop: run_interactive does.
		return false, false, nil
	}
	head, tail, lines, display, split := splitCell(code)
	if !split {
		return false, false, nil
	}
	ctx := in.killCtx
	mem := in.main.Memory()
	at := f.buf + fastHeader + uint32(len(code)) + 1
	put := func(parts ...string) uint32 {
		p := at
		for _, s := range parts {
			b, _ := mem.Read(at, uint32(len(s)))
			copy(b, s)
			at += uint32(len(s))
		}
		mem.WriteByte(at, 0)
		at++
		return p
	}
	headSrc := put(head)
	tailSrc := put(strings.Repeat("\n", lines), tail)
	mode := uint64(pyFileInput)
	if display {
		mode = pySingleInput
	}
	var codes [2]uint64
	defer func() {
		for _, c := range codes {
			if c != 0 {
				in.decRef(c)
			}
		}
	}()
	for i, c := range [...]struct {
		src  uint32
		mode uint64
	}{{headSrc, pyFileInput}, {tailSrc, mode}} {
		if i == 0 && head == "" {
			continue
		}
		codes[i], err = f.compile(in, c.src, nameObj, c.mode)
		if err != nil {
			return false, true, err
		}
		if codes[i] == 0 {
			_, err = in.call(ctx, in.fns.errClear)
			return false, err != nil, err
		}
	}
	for _, c := range codes {
		if c == 0 {
			continue
		}
		if raised, err := in.fastEval(f, c); raised || err != nil {
			ok, err := in.fastFail(f, err)
			return ok, true, err
		}
	}
	return true, true, in.fastFlush(f)
}

// splitCell splits an interactive cell before its last statement, which
// it takes to start on the last line that starts with neither a blank nor
// a comment: head is what comes before (lines newlines), tail the rest.
// display reports whether tail is compiled for the prompt's display: not
// when it starts a compound statement, which the prompt would show the
// expression statements of. split is false when the cell needs the ast
// module to be read right: no such line, a semicolon in tail (the prompt
// shows every expression statement of a line), or a match statement
// (match is a name too).
func splitCell(code string) (head, tail string, lines int, display, split bool) {
	start := -1
	for end := len(code); ; { // the line code[j:end]
		j := strings.LastIndexByte(code[:end], '\n') + 1
		if j < end {
			if c := code[j]; c != ' ' && c != '\t' && c != '\f' && c != '#' && c != '\r' {
				start = j
				break
			}
		}
		if j == 0 {
			break
		}
		end = j - 1
	}
	if start < 0 {
		return "", "", 0, false, false
	}
	for start > 0 { // a decorated definition starts at its decorators
		j := strings.LastIndexByte(code[:start-1], '\n') + 1
		if code[j] != '@' {
			break
		}
		start = j
	}
	head, tail = code[:start], code[start:]
	if strings.IndexByte(tail, ';') >= 0 {
		return "", "", 0, false, false
	}
	word := tail
	if n := strings.IndexFunc(tail, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) }); n >= 0 {
		word = tail[:n]
	}
	switch word {
	case "match", "case":
		return "", "", 0, false, false
	case "if", "for", "while", "with", "try", "def", "class", "async":
		display = false
	default:
		display = tail[0] != '@'
	}
	return head, tail, strings.Count(head, "\n"), display, true
}

// call calls fn and returns its result (fast path functions return one).
func (f *fastState) call(in *Interpreter, fn api.Function, args ...uint64) (uint64, error) {
	return in.call1(fn, args...)
}

// fastFail hands the exception the last C API call raised to the
// bootstrap's fail(), which replies. err, when not nil, is the
// interpreter's own failure, and is returned as it is.
func (in *Interpreter) fastFail(f *fastState, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	exc, err := f.call(in, f.fn.raised)
	if err == nil && exc == 0 {
		// A call failed without setting an exception: CPython's out of
		// memory paths that skip PyErr_NoMemory (compile's tokenizer, when
		// its PyMem_Calloc fails, after code that caught a MemoryError kept
		// what filled the memory). It is that MemoryError, which fail()
		// reports, letting go of the bootstrap's reserve for the next cell.
		if _, err = f.call(in, f.fn.noMemory); err == nil {
			exc, err = f.call(in, f.fn.raised)
		}
	}
	if err != nil {
		return false, err
	}
	if exc == 0 {
		return false, errors.New("runtime: fast path: a C API call failed without an exception")
	}
	delivered := in.host.LastDelivery()
	r, err := f.call(in, f.fn.call1, uint64(f.obj.Fail), exc)
	if err == nil && r == 0 && in.deadErr == nil && in.host.LastDelivery() == delivered {
		// fail() raised, and no interrupt made it: a trace or profile
		// function of the code's (sys.settrace, sys.setprofile) raised on
		// fail's own frame, and CPython has unset it. Fail once more, or
		// the cell would read as interrupted, with no reply.
		in.channel.reset(nil, nil)
		if _, err = in.call1(in.fns.errClear); err == nil {
			r, err = f.call(in, f.fn.call1, uint64(f.obj.Fail), exc)
		}
	}
	in.decRef(exc)
	if err == nil && in.deadErr != nil {
		// Freeing the exception (its traceback, its frames) stopped the
		// interpreter: a recursion a million frames deep overflows the
		// native stack there. This execution says so, not the next.
		err = in.deadErr
	}
	if err != nil {
		return false, err
	}
	if r == 0 {
		// An interrupt hit fail(): the channel holds no reply.
		_, err = in.call1(in.fns.errClear)
		return false, err
	}
	in.decRef(r)
	return false, nil
}

// fastFlush flushes the streams as the bootstrap's flush() does: not the
// ones it found while they write through (PYTHONUNBUFFERED) and are open
// (code may have detached or closed one), every other.
func (in *Interpreter) fastFlush(f *fastState) error {
	for _, s := range [...]struct{ name, own uint32 }{{fastStdout, f.obj.Stdout}, {fastStderr, f.obj.Stderr}} {
		cur, err := f.call(in, f.fn.sysGet, uint64(f.buf+s.name))
		if err != nil {
			return err
		}
		if uint32(cur) == s.own {
			ok, err := in.fastAttrIs(f, s.own, f.obj.WriteThrough, f.obj.True)
			if err == nil && ok {
				ok, err = in.fastAttrIs(f, s.own, f.obj.Closed, f.obj.False)
			}
			if err != nil {
				return err
			}
			if ok {
				continue
			}
		}
		// flush() flushes both streams and swallows what they raise.
		r, err := in.call1(in.fns.callNoArgs, uint64(f.obj.Flush))
		if err != nil {
			return err
		}
		if r == 0 {
			_, err = in.call1(in.fns.errClear)
			return err
		}
		in.decRef(r)
		return nil
	}
	return nil
}

// fastAttrIs reports whether obj's attribute name is the object want,
// clearing what getting it raised (a detached stream's "closed").
func (in *Interpreter) fastAttrIs(f *fastState, obj, name, want uint32) (bool, error) {
	v, err := f.call(in, f.fn.getAttr, uint64(obj), uint64(name))
	if err != nil {
		return false, err
	}
	if v == 0 {
		_, err = in.call1(in.fns.errClear)
		return false, err
	}
	in.decRef(v)
	return uint32(v) == want, nil
}

// ensure makes the scratch buffer hold n bytes after its header (f.buf is
// 0 when the guest is out of memory).
func (f *fastState) ensure(in *Interpreter, n uint64) error {
	need := uint64(fastHeader) + n
	if uint64(f.cap) >= need {
		return nil
	}
	f.release(in)
	if need > 1<<31 {
		return nil
	}
	size := max(uint32(need), 4096)
	p, err := in.malloc(in.killCtx, size)
	if err != nil || p == 0 {
		return err
	}
	f.buf, f.cap = p, size
	mem := in.main.Memory()
	mem.WriteUint32Le(p+fastFlags, cfFlags)
	mem.WriteUint32Le(p+fastFlags+4, uint32(in.pythonMinor()))
	mem.Write(p+fastStdout, []byte("stdout\x00"))
	mem.Write(p+fastStderr, []byte("stderr\x00"))
	return nil
}

// release frees the scratch buffer.
func (f *fastState) release(in *Interpreter) {
	if f.buf != 0 {
		_, _ = in.call(in.killCtx, in.fns.free, uint64(f.buf))
		f.buf, f.cap = 0, 0
	}
}

// pythonMinor is the minor version of the guest's Python (compile()'s
// cf_feature_version).
func (in *Interpreter) pythonMinor() int {
	parts := strings.SplitN(in.version, ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// decRef drops a reference the host holds.
func (in *Interpreter) decRef(p uint64) {
	_, _ = in.call1(in.fns.decRef, p)
}

// cellName is the name of the nth cell, as tracebacks show it.
func cellName(n int64) string { return "<cell-" + strconv.FormatInt(n, 10) + ">" }
