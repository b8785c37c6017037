package ipc

// Message bodies. Each Kind has exactly one body type (named in the Kind
// constants' comments); the msgpack struct tags give the wire names of the
// fields. Directions: S→W is supervisor to worker, W→S worker to
// supervisor.

// Hello is the first frame the worker sends (W→S, ID 0), before reading
// anything. The supervisor must check it with CheckHello before sending
// any request.
type Hello struct {
	ProtocolVersion int    `msgpack:"proto"`   // the worker's ProtocolVersion
	PythonVersion   string `msgpack:"python"`  // e.g. "3.12.7"
	PyodideVersion  string `msgpack:"pyodide"` // e.g. "0.27.2"
	PID             int    `msgpack:"pid"`     // the worker's process id
	// Hardened lists, comma-separated, the lock-down layers the worker
	// applied to itself before running any code (e.g. "seccomp,landlock"),
	// and Refused, one per line, the ones it could not, as "layer: why".
	// Both are empty when the worker was told not to lock down.
	Hardened string `msgpack:"hardened"`
	Refused  string `msgpack:"refused"`
}

// Error is the reply to a request that failed as a request (malformed,
// unknown kind, not valid in the worker's current state, internal
// failure). It is sent in place of the request's normal reply, with the
// request's ID. Python exceptions raised by executed code are not Errors;
// they are reported in Result. Either side may send it.
type Error struct {
	Message string `msgpack:"msg"`  // human-readable description
	Code    string `msgpack:"code"` // one of the Code* constants, or another short token
}

// Error codes carried in Error.Code. The set is open: receivers should
// treat an unknown code like CodeInternal.
const (
	CodeMalformed   = "malformed"    // the request could not be decoded (ErrMalformed)
	CodeUnknownKind = "unknown_kind" // the request's kind is not known (ErrUnknownKind)
	CodeUnexpected  = "unexpected"   // the request is not valid now (e.g. Execute before Initialize)
	CodeInternal    = "internal"     // the receiver failed while handling the request
	CodeTooLarge    = "too_large"    // the reply would not fit a frame (ErrFrameTooLarge)
)

// Error formats the reply as "code: message", so an Error body can be
// returned as a Go error.
func (e Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// Initialize (S→W) sets up the Python environment and loads the RLM
// context, any value EncodeValue accepts. A context too large for one
// frame is sent ahead in Stage frames and Staged is set instead. Reply:
// InitializeReply or Error.
type Initialize struct {
	Context any    `msgpack:"context"` // bound to the Python variable holding the RLM context
	Staged  string `msgpack:"staged"`  // "", or how to read the staging buffer instead (see Stage)
}

// Staging formats: how the bytes a series of Stage frames carried are read.
const (
	StagedText  = "text"  // UTF-8 text, which becomes a Python str
	StagedValue = "value" // the EncodeValue encoding of a value
)

// Stage (S→W) appends Data to the worker's staging buffer, which the next
// Initialize or SetVariable whose Staged field names a staging format
// consumes (and empties). It has no reply. Large values cross the channel
// this way, as a series of frames each well under MaxFrameSize, so neither
// side needs the value in one piece before the worker assembles it.
//
// When File is set, the frame carries no data: the whole value, Size
// bytes, is at the start of the staging file the supervisor shares with
// the worker (a memfd given as the worker's -stage-fd), which the worker
// maps instead of reading the value through the pipe. The supervisor
// leaves the file as it is until the Initialize or SetVariable is answered.
type Stage struct {
	Data string `msgpack:"data"` // any bytes: strings are not checked for UTF-8
	Size int64  `msgpack:"size"` // the size of the whole staged value (a hint for the receiver)
	File bool   `msgpack:"file"` // the value is in the staging file
}

// InitializeReply (W→S) acknowledges Initialize.
type InitializeReply struct{}

// Execute (S→W) runs Python code. While it runs the worker streams Output
// frames and may send BridgeCall requests; it ends with exactly one Result
// (or Error), all carrying the Execute's ID.
type Execute struct {
	Code        string `msgpack:"code"`        // Python source
	Interactive bool   `msgpack:"interactive"` // show a trailing expression's value, like Python's prompt
}

// Complete (S→W) asks whether Source is complete Python input (see
// supervisor.Sandbox.IsComplete). Reply: CompleteReply or Error.
type Complete struct {
	Source string `msgpack:"source"`
}

// CompleteReply (W→S) answers Complete.
type CompleteReply struct {
	Complete bool `msgpack:"complete"`
}

// Names of the streams an Output chunk belongs to.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Output (W→S) is a chunk of output printed by a running Execute: writes
// to one stream, sent in batches while the code runs (see the package
// documentation). Its ID is the Execute's ID.
type Output struct {
	Stream string `msgpack:"stream"` // StreamStdout or StreamStderr
	Data   string `msgpack:"data"`
}

func (o Output) validate() error {
	if o.Stream != StreamStdout && o.Stream != StreamStderr {
		return malformedf("output stream %q is neither %q nor %q", o.Stream, StreamStdout, StreamStderr)
	}
	return nil
}

// Result (W→S) ends an Execute. Error, ErrorType and Traceback are empty
// when the code ran without an uncaught exception. The output is not in it:
// it went ahead in Output frames, and the supervisor keeps what it bounds.
type Result struct {
	Error         string `msgpack:"error"`       // "Type: message" of the uncaught exception
	ErrorType     string `msgpack:"error_type"`  // its class name, e.g. "ZeroDivisionError"
	Traceback     string `msgpack:"traceback"`   // formatted traceback
	DurationNanos int64  `msgpack:"duration_ns"` // wall time spent executing
	// For a SystemExit (or a subclass), what CPython's top level does with
	// it: it writes ExitStderr and exits with ExitStatus (0–255).
	SystemExit bool   `msgpack:"system_exit"`
	ExitStatus int    `msgpack:"exit_status"`
	ExitStderr string `msgpack:"exit_stderr"`
}

// GetVariable (S→W) asks for the value of a global Python variable.
// Reply: GetVariableReply or Error.
type GetVariable struct {
	Name string `msgpack:"name"`
}

// GetVariableReply (W→S) answers GetVariable. Value is in the canonical
// form DecodeValue produces and is nil when Found is false.
type GetVariableReply struct {
	Found bool `msgpack:"found"`
	Value any  `msgpack:"value"`
}

// SetVariable (S→W) binds a global Python variable to a value (any value
// EncodeValue accepts). Reply: SetVariableReply or Error.
type SetVariable struct {
	Name   string `msgpack:"name"`
	Value  any    `msgpack:"value"`
	Staged string `msgpack:"staged"` // "", or how to read the staging buffer instead (see Stage)
}

// SetVariableReply (W→S) acknowledges SetVariable.
type SetVariableReply struct{}

// BridgeCall (W→S) asks the supervisor to run a host function on behalf of
// running Python code, such as "llm_query" or "rlm_query". The worker picks
// its ID (worker-initiated IDs are a separate space from the
// supervisor's); the supervisor answers with a BridgeReply (or Error)
// carrying the same ID.
type BridgeCall struct {
	Method string         `msgpack:"method"` // host function name
	Args   []any          `msgpack:"args"`   // positional arguments, as values
	Kwargs map[string]any `msgpack:"kwargs"` // keyword arguments, as values
	// Batch says the call is one of several the code made at once
	// (llm_query_batched): the supervisor answers them concurrently.
	Batch bool `msgpack:"batch"`
}

// BridgeReply (S→W) answers a BridgeCall. A non-empty Error is raised as
// an exception in Python; otherwise Result is returned.
type BridgeReply struct {
	Result any    `msgpack:"result"`
	Error  string `msgpack:"error"`
}

// Ping (S→W) checks that the worker is responsive. Reply: Pong.
type Ping struct{}

// Pong (W→S) answers Ping.
type Pong struct{}

// Stats (S→W) asks for resource usage. Reply: StatsReply.
type Stats struct{}

// StatsReply (W→S) reports the worker's resource usage.
type StatsReply struct {
	RSSBytes          uint64 `msgpack:"rss"`           // resident set size of the worker process
	HeapBytes         uint64 `msgpack:"heap"`          // Go heap in use
	LinearMemoryBytes uint64 `msgpack:"linear_memory"` // size of the WebAssembly linear memory
	Executions        uint64 `msgpack:"executions"`    // Execute requests completed so far
	UptimeNanos       int64  `msgpack:"uptime_ns"`     // time since the worker started
}

// Shutdown (S→W) asks the worker to exit cleanly. There is no reply: the
// worker stops reading, closes its output and exits.
type Shutdown struct{}

// validator is implemented by bodies with constraints beyond their field
// types. Encode and Decode both apply it.
type validator interface {
	validate() error
}
