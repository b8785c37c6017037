package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// serveProtocolVersion is the version of the JSON-RPC protocol of `serve`
// (docs/serve.md); it changes when a change would break a client.
const serveProtocolVersion = 1

// message is any JSON-RPC 2.0 message as read (decodeMessage): a request
// or notification from the client (HasMethod), or the client's response
// to a bridge request (Result or Error set). A member absent is nil.
type message struct {
	JSONRPC   string
	ID        json.RawMessage // nil when absent (a notification)
	HasMethod bool
	Method    string
	Params    json.RawMessage // an object or an array
	Result    json.RawMessage
	Error     json.RawMessage
}

// Messages as written.
type (
	resultResponse struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}
	errorResponse struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *rpcError       `json:"error"`
	}
	outRequest struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id,omitempty"` // empty: a notification
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}
)

// rpcError is a JSON-RPC error object. Data, for the server's own errors,
// is an errorData.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// errorData says which kind of error it is (one of the kind* constants,
// "no_such_sandbox", "shutdown", or a JSON-RPC one such as
// "invalid_params") and, for execute, what the code printed before it.
type errorData struct {
	Kind      string     `json:"kind"`
	Execution *execution `json:"execution,omitempty"`
	// For an execute that failed with its execution: whether the
	// sandbox is dead after it (killed for ignoring the interrupt, or
	// crashed), so that it must be restarted.
	SandboxDead *bool `json:"sandbox_dead,omitempty"`
	// For the execute whose code called os._exit: the status it gave.
	ExitStatus *int `json:"exit_status,omitempty"`
	// For "busy": which limit was reached, and when to try again.
	Limit        string `json:"limit,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// JSON-RPC error codes: the standard ones, then the server's.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603

	codeSandboxFailure = -32000 // the sandbox cannot run code: see data.kind
	codeTimeout        = -32001
	codeCanceled       = -32002
	codeNoSuchSandbox  = -32003 // never created, destroyed, or its create failed
	codeShutdown       = -32004 // the server is shutting down
	codeUnauthorized   = -32005 // serve --listen: missing or wrong token; the connection is closed
	codeBusy           = -32006 // serve --listen: a limit is reached; data.retry_after_ms says when to try again
)

const (
	kindNoSuchSandbox = "no_such_sandbox"
	kindShutdown      = "shutdown"
	kindUnauthorized  = "unauthorized"
	kindBusy          = "busy"
)

// The limits a "busy" error names (data.limit).
const (
	limitSandboxes     = "max_sandboxes"
	limitPerConnection = "max_sandboxes_per_connection"
	limitMemory        = "memory_budget"
	limitConnections   = "max_connections"
	// As many connections as --max-connections wait to authenticate.
	limitUnauthenticated = "max_unauthenticated"
	limitInflight        = "max_inflight"
	// Not a busy error's: the rejected_total reason of a line longer than
	// --max-message (message_too_large).
	limitMessage = "max_message"
)

// busyError is the "busy" error for limit; retry is when to try again (0:
// when a request of this connection has been answered).
func busyError(limit string, retry time.Duration, format string, args ...any) *rpcError {
	return &rpcError{Code: codeBusy, Message: "busy: " + fmt.Sprintf(format, args...),
		Data: &errorData{Kind: kindBusy, Limit: limit, RetryAfterMS: retry.Milliseconds()}}
}

func newRPCError(code int, kind, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...), Data: &errorData{Kind: kind}}
}

// toRPCError maps a Go error from the supervisor to a JSON-RPC error, by
// the same errorKind the CLI's exit statuses come from.
func toRPCError(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	kind := errorKind(err)
	code := codeSandboxFailure
	switch kind {
	case kindTimeout:
		code = codeTimeout
	case kindCanceled, kindInterrupted:
		code = codeCanceled
	case kindDestroyed:
		code = codeNoSuchSandbox
	case kindUsage:
		code, kind = codeInvalidParams, "invalid_params" // the protocol's word for it
	}
	msg := err.Error()
	switch kind {
	case kindDestroyed:
		msg = "supervisor: sandbox destroyed" // not the cancel it caused, and the destroy twice
	case kindDead:
		if status, ok := processExit(err); ok {
			// Not the runtime's "os._exit or a fatal error": the CLI's words.
			msg = "supervisor: sandbox is dead: " + processExitMessage(status)
		}
	}
	if h := serveHint(err); h != "" {
		msg += " (" + h + ")"
	}
	return &rpcError{Code: code, Message: msg, Data: &errorData{Kind: kind}}
}

// serveHint is hint in the protocol's terms.
func serveHint(err error) string {
	switch errorKind(err) {
	case kindTimeout:
		return ""
	case kindWorkerUnavailable, kindWorkerExited, kindDead:
		if errors.Is(err, supervisor.ErrOutOfMemory) {
			return "the machine or container ran out of memory and the kernel killed the sandbox's worker; " +
				"give sandboxes a memory_limit below the memory that is free, so that the code's allocations raise MemoryError instead"
		}
		if errorKind(err) == kindWorkerUnavailable && strings.Contains(err.Error(), "ulimit -f") {
			return hint(err)
		}
		if errorKind(err) == kindWorkerUnavailable {
			return "build rlm-worker (`make build`) and keep it next to rlm-sandbox or on $PATH, " +
				"set RLM_WORKER to its path, or create the sandbox with \"direct\": true"
		}
		return "the sandbox's interpreter is gone and everything it held with it; " +
			"restart the sandbox (`restart`), or destroy it and create another"
	}
	return hint(err)
}
