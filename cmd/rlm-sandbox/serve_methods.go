package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/pytext"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// doneFunc answers a request: with a result, or with an error.
type doneFunc func(result any, err error)

// methods lists the methods a client may call, for the error naming them.
const methods = "create, execute, get_variable, set_variable, cancel, destroy, restart, stats, version, authenticate"

// dispatch starts serving one request; done is called once, maybe later
// from another goroutine.
func (s *server) dispatch(m *message, done doneFunc) {
	if s.hub.draining() && startsWork(m.Method) {
		done(nil, newRPCError(codeShutdown, kindShutdown, "the server is draining (shutting down): it takes no new work; connect again to reach another replica"))
		return
	}
	switch m.Method {
	case "authenticate":
		s.authenticate(m.Params, done)
	case "create":
		s.create(m.Params, done)
	case "execute":
		var p executeParams
		s.queue(m.Params, &p, &p.sandboxParam, done, func(e *sandboxEntry, sb supervisor.Sandbox, ctx context.Context) (any, error) {
			return s.execute(ctx, e, sb, p)
		})
	case "get_variable":
		var p variableParams
		s.queue(m.Params, &p, &p.sandboxParam, done, func(e *sandboxEntry, sb supervisor.Sandbox, _ context.Context) (any, error) {
			v, found, err := sb.GetVariable(s.ctx, p.Name)
			if errors.Is(err, supervisor.ErrTooLarge) {
				// A value too large to come back: the sandbox's limit, not
				// the request's parameters (-32000, as docs/serve.md says).
				return nil, &rpcError{Code: codeSandboxFailure, Message: err.Error(), Data: &errorData{Kind: kindTooLarge}}
			}
			if err != nil {
				return nil, variableError(err)
			}
			return variableResult{Found: found, Value: toJSON(v)}, nil
		})
	case "set_variable":
		var p setVariableParams
		s.queue(m.Params, &p, &p.sandboxParam, done, func(e *sandboxEntry, sb supervisor.Sandbox, _ context.Context) (any, error) {
			if err := sb.SetVariable(s.ctx, p.Name, p.value); err != nil {
				return nil, variableError(err)
			}
			return struct{}{}, nil
		})
	case "stats":
		s.stats(m.Params, done)
	case "restart":
		var p sandboxParam
		s.queue(m.Params, &p, &p, done, func(e *sandboxEntry, sb supervisor.Sandbox, _ context.Context) (any, error) {
			if err := sb.Restart(s.ctx); err != nil {
				return nil, err
			}
			if err := sb.Initialize(s.ctx, e.value); err != nil {
				return nil, err
			}
			return newCreateResult(e.id, sb.Info()), nil
		})
	case "cancel", "destroy":
		e := s.entry(m.Params, done)
		if e == nil {
			return
		}
		if m.Method == "destroy" {
			s.mu.Lock()
			delete(s.sandboxes, e.id)
			s.mu.Unlock()
			e.destroy()
		} else {
			e.cancelRuns(s.ctx)
		}
		done(struct{}{}, nil)
	case "version":
		if err := decodeParams(m.Params, &noParams{}); err != nil {
			done(nil, err)
			return
		}
		done(newVersionInfo(), nil)
	default:
		done(nil, newRPCError(codeMethodNotFound, "method_not_found", "no method %q; the methods are %s", m.Method, methods))
	}
}

// urlList is create's index_url: a list of strings, or one string (a list
// of one), as --index-url and Config.IndexURL take either.
type urlList []string

func (l *urlList) UnmarshalJSON(b []byte) error {
	var one string
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*l = urlList{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// Parameters and results of the methods.
type (
	sandboxParam struct {
		Sandbox string `json:"sandbox"`
	}
	createParams struct {
		Context       json.RawMessage `json:"context"`         // any JSON value; default ""
		TimeoutMS     *float64        `json:"timeout_ms"`      // default 30000; 0: none
		WallTimeoutMS float64         `json:"wall_timeout_ms"` // default 0: none
		MaxOutput     int             `json:"max_output"`      // default 50000; negative: none
		MemoryLimit   uint64          `json:"memory_limit"`    // bytes; default 0: 4 GiB
		Direct        *bool           `json:"direct"`          // true: in the server's process; false: in a worker; absent: see workerMode
		Stream        bool            `json:"stream"`          // "output" notifications
		Bridges       []string        `json:"bridges"`         // "llm_query", "rlm_query"
		IndexURL      urlList         `json:"index_url"`       // where Pyodide is loaded from; default: the server's
	}
	createResult struct {
		Sandbox        string `json:"sandbox"`
		Worker         bool   `json:"worker"`
		PID            int    `json:"pid"`
		PythonVersion  string `json:"python_version"`
		PyodideVersion string `json:"pyodide_version"`
		// The worker's lock-down (supervisor.Info): what was applied, and
		// what was refused and why.
		Hardening        []string `json:"hardening"`
		HardeningRefused []string `json:"hardening_refused"`
	}
	executeParams struct {
		sandboxParam
		Code        *string `json:"code"` // required
		Interactive bool    `json:"interactive"`
	}
	variableParams struct {
		sandboxParam
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	}
	setVariableParams struct {
		variableParams
		value any // Value parsed, by validate
	}
	variableResult struct {
		Found bool `json:"found"`
		Value any  `json:"value"`
	}
	statsResult struct {
		Worker            bool    `json:"worker"`
		PID               int     `json:"pid"`
		RSSBytes          uint64  `json:"rss_bytes"`
		LinearMemoryBytes uint64  `json:"linear_memory_bytes"`
		Executions        uint64  `json:"executions"`
		UptimeMS          float64 `json:"uptime_ms"`
	}
	outputParams struct {
		Sandbox string `json:"sandbox"`
		Stream  string `json:"stream"` // "stdout" or "stderr"
		Line    string `json:"line"`
	}
	llmQueryParams struct {
		Sandbox string `json:"sandbox"`
		Prompt  string `json:"prompt"`
	}
	rlmQueryParams struct {
		Sandbox string `json:"sandbox"`
		Task    string `json:"task"`
		Context any    `json:"context"`
	}
)

func (p *executeParams) validate() error {
	if p.Code == nil {
		return invalidParams(`"code" is required`)
	}
	return nil
}

func (p *variableParams) validate() error {
	if p.Name == "" {
		return invalidParams(`"name" is required`)
	}
	return nil
}

func (p *setVariableParams) validate() error {
	if err := p.variableParams.validate(); err != nil {
		return err
	}
	if len(p.Value) == 0 {
		return invalidParams(`set_variable needs "value"`)
	}
	v, err := parseValue(p.Value)
	if err != nil {
		return invalidParams("value: %v", err)
	}
	p.value = v
	return nil
}

func newCreateResult(id string, info supervisor.Info) createResult {
	return createResult{Sandbox: id, Worker: info.Worker, PID: info.PID, PythonVersion: info.PythonVersion, PyodideVersion: info.PyodideVersion,
		Hardening: nonNil(info.Hardening), HardeningRefused: nonNil(info.HardeningRefused)}
}

// nonNil makes an empty list [] in JSON, not null.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func invalidParams(format string, args ...any) *rpcError {
	return newRPCError(codeInvalidParams, "invalid_params", format, args...)
}

// lookup finds a sandbox by id.
func (s *server) lookup(id string) (*sandboxEntry, error) {
	if id == "" {
		return nil, invalidParams(`"sandbox" is required (the id create returned)`)
	}
	s.mu.Lock()
	e := s.sandboxes[id]
	s.mu.Unlock()
	if e == nil {
		return nil, newRPCError(codeNoSuchSandbox, kindNoSuchSandbox, "no sandbox %q (destroyed, its create failed, or never created)", id)
	}
	return e, nil
}

// queue decodes params into p and runs job on the sandbox they name, after
// the requests for that sandbox read before this one. The job's context
// is the sandbox's runContext as this request is read (for execute).
func (s *server) queue(raw json.RawMessage, p any, sp *sandboxParam, done doneFunc,
	job func(*sandboxEntry, supervisor.Sandbox, context.Context) (any, error)) {
	if err := decodeParams(raw, p); err != nil {
		done(nil, err)
		return
	}
	if v, ok := p.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			done(nil, err)
			return
		}
	}
	e, err := s.lookup(sp.Sandbox)
	if err != nil {
		done(nil, err)
		return
	}
	ctx := e.runContext()
	ok := e.q.push(func() {
		sb, err := e.sandbox()
		if err != nil {
			done(nil, err)
			return
		}
		done(job(e, sb, ctx))
	})
	if !ok {
		done(nil, newRPCError(codeNoSuchSandbox, kindDestroyed, "sandbox %s was destroyed", e.id))
	}
}

// variableError is the error of a get_variable or set_variable. A timeout
// or cancel (of a value's own code: a __repr__, an __iter__) says whether
// the sandbox is dead after it (the code ignored the interrupt and was
// killed), as an execute's does.
func variableError(err error) error {
	re := toRPCError(err)
	if d, ok := re.Data.(*errorData); ok && (re.Code == codeTimeout || re.Code == codeCanceled) {
		dead := errors.Is(err, supervisor.ErrDead)
		d.SandboxDead = &dead
	}
	return re
}

// entry is the sandbox that the parameters raw of a request answered at
// once name, or nil when done has been called with the error.
func (s *server) entry(raw json.RawMessage, done doneFunc) *sandboxEntry {
	var p sandboxParam
	if err := decodeParams(raw, &p); err != nil {
		done(nil, err)
		return nil
	}
	e, err := s.lookup(p.Sandbox)
	if err != nil {
		done(nil, err)
		return nil
	}
	return e
}

// stats answers at once, without waiting for the requests before it on
// the sandbox (a monitor asks while a long execute runs: the supervisor's
// Stats does not wait for the code either), unless the sandbox's create
// has not finished: then after it, in the sandbox's queue.
func (s *server) stats(raw json.RawMessage, done doneFunc) {
	var p sandboxParam
	job := func(_ *sandboxEntry, sb supervisor.Sandbox, _ context.Context) (any, error) {
		st, err := sb.Stats(s.ctx)
		if err != nil {
			return nil, err
		}
		return statsResult{
			Worker: st.Worker, PID: st.PID, RSSBytes: st.RSSBytes, LinearMemoryBytes: st.LinearMemoryBytes,
			Executions: st.Executions, UptimeMS: millis(st.Uptime),
		}, nil
	}
	e := s.entry(raw, done)
	if e == nil {
		return
	}
	sb, err := e.sandbox()
	switch {
	case err != nil:
		done(nil, err)
	case sb != nil:
		go func() { done(job(e, sb, nil)) }()
	default:
		s.queue(raw, &p, &p, done, job)
	}
}

// create registers the sandbox at once, so requests naming its id can
// follow without waiting, and starts it first thing in its queue.
func (s *server) create(raw json.RawMessage, done doneFunc) {
	// Every create takes the next id, whatever becomes of it: a client
	// that sends execute on the id create will return without waiting
	// must not reach another sandbox because an earlier create failed.
	s.mu.Lock()
	s.created++
	id := fmt.Sprintf("s%d", s.created)
	s.mu.Unlock()
	var p createParams
	if err := decodeParams(raw, &p); err != nil {
		done(nil, err)
		return
	}
	switch {
	case !memoryLimitOK(p.MemoryLimit):
		done(nil, invalidParams("memory_limit %d: from %d (32 MiB) to %d (4 GiB) bytes, or 0 for 4 GiB", p.MemoryLimit, minMemoryLimit, maxMemoryLimit))
		return
	case p.TimeoutMS != nil && (*p.TimeoutMS < 0 || math.IsNaN(*p.TimeoutMS)):
		done(nil, invalidParams("timeout_ms %v: 0 (none) or more", *p.TimeoutMS))
		return
	case p.WallTimeoutMS < 0 || math.IsNaN(p.WallTimeoutMS):
		done(nil, invalidParams("wall_timeout_ms %v: 0 (none) or more", p.WallTimeoutMS))
		return
	}
	// The server holds an execution's output, up to max_output characters
	// of each stream: --max-output-limit bounds what a client may ask.
	if limit := s.maxOutputLimit; limit > 0 && (p.MaxOutput < 0 || p.MaxOutput > limit) {
		done(nil, invalidParams("max_output %d: this server returns at most %d characters of each stream (--max-output-limit); ask for %d or less",
			p.MaxOutput, limit, limit))
		return
	}
	if s.requireWorker && p.Direct != nil && *p.Direct {
		done(nil, invalidParams(`direct: this server runs every sandbox in an rlm-worker (--require-worker); leave "direct" out or make it false`))
		return
	}
	var value any = ""
	if len(p.Context) > 0 {
		v, err := parseValue(p.Context)
		if err != nil {
			done(nil, invalidParams("context: %v", err))
			return
		}
		value = v
	}
	bridges := map[string]bool{}
	for _, b := range p.Bridges {
		if b != "llm_query" && b != "rlm_query" {
			done(nil, invalidParams("bridges: unknown bridge %q (there are llm_query and rlm_query)", b))
			return
		}
		bridges[b] = true
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		done(nil, newRPCError(codeShutdown, kindShutdown, "the server is shutting down"))
		return
	}
	release, err := s.hub.admit(s)
	if err != nil {
		s.mu.Unlock()
		done(nil, err)
		return
	}
	e := &sandboxEntry{id: id, q: newJobQueue(), value: value}
	if release != nil {
		e.gone = func() { release(e) }
	}
	e.ctx, e.cancel = context.WithCancel(s.ctx)
	e.runCtx, e.runCancel = context.WithCancelCause(s.ctx)
	s.sandboxes[e.id] = e
	s.mu.Unlock()

	cfg := s.sandboxConfig(e, p, bridges)
	e.q.push(func() {
		sb, err := s.hub.newSandbox(e.ctx, cfg, p)
		if err == nil {
			if err = sb.Initialize(e.ctx, value); err != nil {
				sb.Destroy()
			}
		}
		e.mu.Lock()
		if e.destroyed {
			if err == nil {
				sb.Destroy()
			}
			err = newRPCError(codeNoSuchSandbox, kindDestroyed, "sandbox %s was destroyed while it started", e.id)
		}
		if err == nil {
			e.sb = sb
		} else {
			e.createErr = err
		}
		e.mu.Unlock()
		if err != nil {
			s.mu.Lock()
			if s.sandboxes[e.id] == e {
				delete(s.sandboxes, e.id)
			}
			s.mu.Unlock()
			e.q.close()
			e.ended()
			s.hub.createFailed(e.ctx.Err() == nil)
			done(nil, err)
			return
		}
		s.hub.created()
		done(newCreateResult(e.id, sb.Info()), nil)
		s.hub.measure(e, sb, 0)
	})
}

// sandboxConfig is the supervisor.Config create's params describe.
func (s *server) sandboxConfig(e *sandboxEntry, p createParams, bridges map[string]bool) supervisor.Config {
	cfg := supervisor.Config{
		WallTimeout:     time.Duration(p.WallTimeoutMS * float64(time.Millisecond)),
		MaxOutputLength: p.MaxOutput,
		MemoryLimit:     p.MemoryLimit,
		IndexURL:        []string(p.IndexURL),
		Logger:          s.logger.With("sandbox", e.id),
		KeepDictOrder:   true, // get_variable and rlm_query's ctx give dicts in order
	}
	if p.TimeoutMS != nil {
		cfg.Timeout = time.Duration(*p.TimeoutMS * float64(time.Millisecond))
		if cfg.Timeout <= 0 {
			cfg.Timeout = -1 // 0 means none here, the default in the library
		}
	}
	cfg.UseWorker = s.workerMode(p.Direct)
	if p.Stream {
		cfg.OnStdout = func(line string) {
			s.send(outRequest{JSONRPC: "2.0", Method: "output", Params: outputParams{e.id, "stdout", pytext.Replace(line)}})
		}
		cfg.OnStderr = func(line string) {
			s.send(outRequest{JSONRPC: "2.0", Method: "output", Params: outputParams{e.id, "stderr", pytext.Replace(line)}})
		}
	}
	cfg.OnLLMQuery = func(ctx context.Context, prompt string) (string, error) {
		if !bridges["llm_query"] {
			return "", errors.New(`llm_query is not available: the client did not list it in create's "bridges"`)
		}
		return s.callClient(ctx, "llm_query", llmQueryParams{e.id, prompt})
	}
	cfg.OnRLMQuery = func(ctx context.Context, task string, value any) (string, error) {
		if !bridges["rlm_query"] {
			return "", errors.New(`rlm_query is not available: the client did not list it in create's "bridges"`)
		}
		return s.callClient(ctx, "rlm_query", rlmQueryParams{e.id, task, toJSON(value)})
	}
	return cfg
}

// workerMode is where create's "direct" puts the sandbox: true in the
// server's process, false in a worker; left out, in a worker when one can
// start and else in-process (supervisor.WorkerAuto, which logs a
// warning), unless --require-worker makes it a worker or nothing (and
// refuses "direct": true, see create).
func (s *server) workerMode(direct *bool) supervisor.WorkerMode {
	switch {
	case direct != nil && *direct:
		return supervisor.WorkerNever
	case direct != nil || s.requireWorker:
		return supervisor.WorkerAlways
	}
	return supervisor.WorkerAuto
}

// execute runs code under ctx (see sandboxEntry.runCtx); a timeout or
// cancellation is an error whose data holds what the code printed until
// then. A cancel read before the code started fails it without running.
func (s *server) execute(ctx context.Context, e *sandboxEntry, sb supervisor.Sandbox, p executeParams) (any, error) {
	if context.Cause(ctx) == errCanceledByClient {
		s.hub.observeExecute(nil, supervisor.ErrCanceled, 0)
		interrupted, dead := "KeyboardInterrupt", false
		return nil, &rpcError{Code: codeCanceled, Message: "execution canceled before it started (cancel came while it waited its turn)",
			Data: &errorData{Kind: kindCanceled, Execution: &execution{Error: &interrupted, ErrorType: &interrupted}, SandboxDead: &dead}}
	}
	run := sb.Execute
	if p.Interactive {
		run = sb.ExecuteInteractive
	}
	start := time.Now()
	ce, err := run(ctx, *p.Code)
	s.hub.observeExecute(ce, err, time.Since(start))
	if s.hub != nil {
		e.q.push(func() { s.hub.measure(e, sb, time.Second) }) // after this execute, before the next
	}
	if err == nil {
		return executionResult(ce, nil), nil
	}
	re := toRPCError(err)
	if ce != nil {
		dead := errors.Is(err, supervisor.ErrDead)
		data := &errorData{Kind: errorKind(err), Execution: executionResult(ce, err), SandboxDead: &dead}
		if status, ok := processExit(err); ok && data.Kind == kindDead {
			// os._exit raises no exception: say it, as exec --json does.
			// Not for a timeout or cancel (the code called os._exit once
			// interrupted): their execution is the interrupted one.
			data.Execution.Error = nullable(processExitType + ": " + processExitMessage(status))
			data.Execution.ErrorType = nullable(processExitType)
			data.ExitStatus = &status
		}
		re.Data = data
	}
	return nil, re
}
