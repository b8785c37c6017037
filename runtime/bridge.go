package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/pymarshal"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// BridgeFunc answers a call Python code makes to the host. Python's
// llm_query(prompt) arrives as method "llm_query" with args [prompt];
// rlm_query(task, ctx) as "rlm_query" with [task] or [task, ctx]. Arguments
// are converted to Go as Get converts values; the result goes back to
// Python as Set converts them. An error is raised in Python as BridgeError
// with err.Error() as its message.
//
// ctx is cancelled when the execution is interrupted (Python then gets
// KeyboardInterrupt at once, without waiting for the function to return)
// or the interpreter is closed. The batched forms (llm_query_batched,
// rlm_query_batched) call it concurrently, once per item, from several
// goroutines.
type BridgeFunc func(ctx context.Context, method string, args []any) (any, error)

// BatchBridgeFunc answers several calls of one method at once: results[i]
// or errs[i] answers calls[i] (see Config.BridgeBatch).
type BatchBridgeFunc func(ctx context.Context, method string, calls [][]any) (results []any, errs []error)

// bridgeDevice is /dev/rlm-bridge. The guest writes a request (an 8-byte
// little-endian length, then marshal data (method, [args, ...]), where
// args is a tuple, or a str s standing for (s,)); the write that completes
// it runs the calls and blocks until they answer or the execution is
// interrupted. The guest then reads the reply: an 8-byte length and
// marshal data: (3, [value, ...]) when every call was answered, else
// (0, [(0, value) | (1, message), ...]); (2,) when interrupted.
type bridgeDevice struct {
	in     *Interpreter
	fn     BridgeFunc
	inline bool // Config.BridgeInline
	batch  BatchBridgeFunc
	conc   int // Config.BridgeConcurrency
	req    []byte
	max    int // the most a request may hold (deviceLimit)
	unread     // the reply
}

func (d *bridgeDevice) Write(p []byte) (int, vfs.Errno) {
	if len(p) > d.max+8-len(d.req) {
		d.req = nil // what came before is no request either
		return 0, vfs.EFBIG
	}
	d.req = append(d.req, p...)
	if len(d.req) < 8 {
		return len(p), vfs.ESUCCESS
	}
	n := binary.LittleEndian.Uint64(d.req)
	if n > uint64(d.max) {
		d.req = nil
		return 0, vfs.EFBIG
	}
	if uint64(len(d.req)-8) < n {
		return len(p), vfs.ESUCCESS
	}
	body := d.req[8 : 8+n]
	d.req = nil
	start := time.Now()
	reply := d.serve(body)
	d.in.host.AddIdle(time.Since(start)) // the guest waited: not its CPU time
	b := binary.LittleEndian.AppendUint64(d.unread[:0], uint64(len(reply)))
	d.unread = append(b, reply...)
	return len(p), vfs.ESUCCESS
}

// unread is the part of a reply the guest has not read yet; it reads it in
// as many reads as it likes.
type unread []byte

func (u *unread) Read(p []byte) (int, vfs.Errno) {
	n := copy(p, *u)
	*u = (*u)[n:]
	return n, vfs.ESUCCESS
}

var interruptedReply, _ = pymarshal.Encode(pymarshal.Tuple{int64(2)})

func (d *bridgeDevice) serve(body []byte) []byte {
	v, err := d.in.decode(body)
	t, ok := v.([]any)
	if err != nil || !ok || len(t) != 2 {
		// Raised as BridgeError by the first call's helper.
		return d.reply([]any{nil}, []error{fmt.Errorf("malformed bridge request: %v", err)})
	}
	method, _ := t[0].(string)
	calls, _ := t[1].([]any)
	args := func(i int) []any {
		switch c := calls[i].(type) {
		case string:
			return []any{c}
		case []any:
			return c
		}
		return nil
	}
	if len(calls) == 1 {
		r, err, ok := d.one(method, args(0))
		if !ok {
			return interruptedReply
		}
		return d.reply([]any{r}, []error{err})
	}
	values, errs := make([]any, len(calls)), make([]error, len(calls))
	if d.fn == nil {
		none := errors.New(noBridge(method))
		for i := range errs {
			errs[i] = none
		}
		return d.reply(values, errs)
	}
	in := d.in
	ctx := in.bridgeCtx()
	in.bridgeCalls += len(calls)
	if len(calls) > 1 && d.inline && d.batch != nil {
		all := make([][]any, len(calls))
		for i := range calls {
			all[i] = args(i)
		}
		rs, es := d.batch(ctx, method, all)
		for i := range values {
			switch {
			case i < len(es) && es[i] != nil:
				errs[i] = es[i]
			case i < len(rs):
				values[i] = rs[i]
			default:
				errs[i] = errors.New("no answer")
			}
		}
		if in.interrupted() {
			in.endBridgeCtx()
			return interruptedReply
		}
		return d.reply(values, errs)
	}
	// At most conc goroutines, each taking the next call until none is
	// left or the execution is interrupted (ctx).
	runners := len(calls)
	if d.conc > 0 && d.conc < runners {
		runners = d.conc
	}
	for i := range errs {
		errs[i] = errNotCalled // until its call is made
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(runners)
	for range runners {
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(calls) {
					return
				}
				values[i], errs[i] = d.fn(ctx, method, args(i))
			}
		}()
	}
	if !in.waitBridge(wg.Wait) || in.interrupted() {
		// Leave the callbacks behind with their context cancelled; they
		// write only to values and errs, which nobody reads any more.
		in.endBridgeCtx()
		return interruptedReply
	}
	return d.reply(values, errs)
}

// reply encodes the answers to a request's calls: values[i], or errs[i]
// when it is not nil. When every call was answered, and every value can
// be converted, the reply is (3, values): the guest takes the list as it
// is, without a tuple per call to build and take apart.
func (d *bridgeDevice) reply(values []any, errs []error) []byte {
	if !slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		if b, err := pymarshal.Encode(pymarshal.Tuple{int64(3), values}); err == nil {
			return b
		}
	}
	results := make([]any, len(values))
	for i, v := range values {
		if errs[i] != nil {
			results[i] = fail(errs[i].Error())
		} else {
			results[i] = pymarshal.Tuple{int64(0), v}
		}
	}
	return d.encode(pymarshal.Tuple{int64(0), results})
}

func fail(msg string) pymarshal.Tuple { return pymarshal.Tuple{int64(1), msg} }

// errNotCalled answers a call of a batch that the host did not make: the
// execution was interrupted first.
var errNotCalled = errors.New("not called: the execution was interrupted")

func noBridge(method string) string {
	return fmt.Sprintf("%s: the host answers no bridge calls", method)
}

// one runs a single call of method and returns its answer; ok is false
// when the execution was interrupted first (the pending signal taken: the
// guest raises KeyboardInterrupt itself).
func (d *bridgeDevice) one(method string, args []any) (r any, err error, ok bool) {
	if d.fn == nil {
		return nil, errors.New(noBridge(method)), true
	}
	in := d.in
	ctx := in.bridgeCtx()
	in.bridgeCalls++
	if d.inline {
		r, err = d.fn(ctx, method, args)
		if in.interrupted() {
			in.endBridgeCtx()
			return nil, nil, false
		}
		return r, err, true
	}
	var (
		res  any
		ferr error
	)
	if !in.waitBridge(func() { res, ferr = d.fn(ctx, method, args) }) || in.interrupted() {
		// Leave the callback behind with its context cancelled; it
		// writes only to res and ferr, which nobody reads any more.
		in.endBridgeCtx()
		return nil, nil, false
	}
	return res, ferr, true
}

// bridgeCtx returns the context of the request's bridge calls, made at
// the first: one per request rather than one per call, which an llm_query
// loop paid for in allocations. It is cancelled when the request ends, or
// when a call is left behind (an interrupt, Close); the next call then
// gets a new one.
func (in *Interpreter) bridgeCtx() context.Context {
	if in.bctx == nil {
		in.bctx, in.bcancel = context.WithCancel(in.reqCtx)
	}
	return in.bctx
}

// endBridgeCtx cancels the context bridgeCtx made, if any.
func (in *Interpreter) endBridgeCtx() {
	if in.bcancel != nil {
		in.bcancel()
		in.bctx, in.bcancel = nil, nil
	}
}

// llmShort is the longest reply /dev/rlm-llm gives in one piece: the
// guest reads llmShort+1 bytes at once (rlm.py).
const llmShort = 65535

// llmDevice is /dev/rlm-llm, the short path of llm_query(prompt): it
// spares the guest building and parsing marshal data for the call an
// agent makes most. Each write is one call, whose prompt is the bytes
// written (str.encode("utf-8", "surrogatepass"), as marshal has them);
// the reply then read is a status byte and a body:
//
//	'0' the answer, UTF-8 text
//	'1' the error message, UTF-8 text
//	'2' nothing: the execution was interrupted
//	'3' the answer, marshal data (an answer that is not a string)
//
// A reply longer than llmShort bytes comes as 'L', its length (8 bytes,
// little-endian), then itself. Go strings that are not UTF-8 get U+FFFD
// for their bad bytes, as pymarshal.Encode gives them.
type llmDevice struct {
	b   *bridgeDevice
	buf []byte // the reply, kept for the next one unless large
	unread
}

func (d *llmDevice) Write(p []byte) (int, vfs.Errno) {
	start := time.Now()
	r, err, ok := d.b.one("llm_query", []any{string(p)})
	d.b.in.host.AddIdle(time.Since(start)) // the guest waited: not its CPU time
	if cap(d.buf) > 1<<20 {
		d.buf = nil
	}
	b := d.buf[:0]
	s, isStr := r.(string)
	var m []byte
	if ok && err == nil && !isStr {
		if m, err = pymarshal.Encode(r); err != nil {
			err = fmt.Errorf("the host's answer cannot be converted to Python: %v", err)
		}
	}
	switch {
	case !ok:
		b = append(b, '2')
	case err != nil:
		b = append(append(b, '1'), pymarshal.Text(err.Error())...)
	case isStr:
		b = append(append(b, '0'), pymarshal.Text(s)...)
	default:
		b = append(append(b, '3'), m...)
	}
	if len(b) > llmShort {
		b = append(binary.LittleEndian.AppendUint64([]byte{'L'}, uint64(len(b))), b...)
	}
	d.buf, d.unread = b, b
	return len(p), vfs.ESUCCESS
}

// encode marshals a reply, replacing results that cannot be converted to
// Python with errors.
func (d *bridgeDevice) encode(reply pymarshal.Tuple) []byte {
	b, err := pymarshal.Encode(reply)
	if err == nil {
		return b
	}
	if results, ok := reply[1].([]any); ok {
		for i, r := range results {
			if _, err := pymarshal.Encode(r); err != nil {
				results[i] = fail(fmt.Sprintf("the host's answer cannot be converted to Python: %v", err))
			}
		}
		if b, err := pymarshal.Encode(reply); err == nil {
			return b
		}
	}
	b, _ = pymarshal.Encode(pymarshal.Tuple{int64(0), []any{}})
	return b
}

// interrupted reports, after the calls returned, whether the execution was
// interrupted meanwhile (a cancelled callback returns at once, possibly
// before the interrupt is signalled), taking the pending signal.
func (in *Interpreter) interrupted() bool {
	if in.intr.Load() != 0 || in.reqCtx.Err() != nil {
		in.intr.Swap(0)
		return true
	}
	return false
}

// waitBridge runs call (the bridge calls) on another goroutine and waits
// until it returns, and returns false when the execution is interrupted
// first (taking the pending signal: the guest raises KeyboardInterrupt
// itself) or the interpreter is closed; call is then left behind. The wait
// is woken by the answer, the signal or Close, whichever comes first: a
// call the model takes seconds to answer costs no wake-ups meanwhile (with
// an InterruptSource that can wake a waiter).
func (in *Interpreter) waitBridge(call func()) bool {
	r := in.runner
	if r == nil {
		r = newBridgeRunner(in.killCtx)
		in.runner = r
	}
	a, ok := in.intr.(*AtomicInterrupt)
	if !ok {
		return in.waitRunner(r, call)
	}
	r.work <- job{call: call}
	if r.spin > 0 {
		// A callback that answers at once has answered within the spin.
		for start := time.Now(); time.Since(start) < r.spin; {
			select {
			case <-r.done:
				return in.killCtx.Err() == nil
			default:
			}
			if a.Load() != 0 || in.killCtx.Err() != nil {
				break
			}
			goruntime.Gosched()
		}
	}
	for {
		wake := a.waitChan()
		if wake == nil { // a signal is pending
			in.abandon(r)
			in.intr.Swap(0)
			return false
		}
		select {
		case <-r.done:
			return in.killCtx.Err() == nil
		case <-wake:
		case <-in.killCtx.Done():
			in.abandon(r)
			return false
		}
	}
}

// waitRunner is waitBridge for an InterruptWaiter other than
// AtomicInterrupt: the runner cancels a context when the call returns,
// and the wait is WaitInterrupt's.
func (in *Interpreter) waitRunner(r *bridgeRunner, call func()) bool {
	answered, finish := context.WithCancel(in.killCtx)
	defer finish()
	r.work <- job{call: call, finish: finish}
	for answered.Err() == nil {
		in.intr.WaitInterrupt(answered, -1)
		if answered.Err() == nil && in.intr.Load() != 0 {
			in.abandon(r)
			in.intr.Swap(0)
			return false
		}
	}
	if in.killCtx.Err() != nil {
		in.abandon(r)
		return false
	}
	<-r.done
	return true
}

// bridgeSpin is how long a bridge runner, and the interpreter that handed
// it a call, poll for the other's next move before they block, with two
// processors or more.
const bridgeSpin = 50 * time.Microsecond

// bridgeRunner is the goroutine that runs an interpreter's bridge calls
// for waitBridge, kept from one call to the next: a goroutine started per
// call (its stack grown anew each time, with a context and a Gosched to
// hand over) cost an instantly answered llm_query in direct mode about
// half its round trip. A runner whose call is left behind (an interrupt,
// Close) ends when the call returns; the next call gets a new one.
type bridgeRunner struct {
	work chan job      // one slot: the interpreter never waits to hand a call over
	done chan struct{} // one value per job, sent when it returns
	quit chan struct{} // closed when abandoned
	spin time.Duration
}

type job struct {
	call   func()
	finish func() // called after done is sent, or nil
}

func newBridgeRunner(kill context.Context) *bridgeRunner {
	r := &bridgeRunner{work: make(chan job, 1), done: make(chan struct{}, 1), quit: make(chan struct{})}
	if goruntime.GOMAXPROCS(0) >= 2 {
		r.spin = bridgeSpin
	}
	go r.loop(kill)
	return r
}

func (r *bridgeRunner) loop(kill context.Context) {
	for {
		var j job
		if !r.poll(&j) {
			select {
			case j = <-r.work:
			case <-r.quit:
				return
			case <-kill.Done():
				return
			}
		}
		j.call()
		r.done <- struct{}{}
		if j.finish != nil {
			j.finish()
		}
		select {
		case <-r.quit:
			return
		default:
		}
	}
}

// poll looks for the next call for up to r.spin.
func (r *bridgeRunner) poll(j *job) bool {
	for start := time.Now(); time.Since(start) < r.spin; {
		select {
		case *j = <-r.work:
			return true
		case <-r.quit:
			return false
		default:
		}
		goruntime.Gosched()
	}
	return false
}

// abandon leaves r's call behind: r ends when the call returns, or at
// once if it has returned already (an interrupt and the answer came
// together).
func (in *Interpreter) abandon(r *bridgeRunner) {
	close(r.quit)
	in.runner = nil
}
