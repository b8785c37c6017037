package main

import (
	"errors"
	"math"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/pytext"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// execution is the JSON form of a supervisor.CodeExecution, written by
// `exec --json` and returned by the `execute` method of `serve`.
type execution struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Error is "Type: message" of the exception the code raised, or null.
	Error     *string `json:"error"`
	ErrorType *string `json:"error_type"`
	Traceback *string `json:"traceback"`

	DurationMS       float64 `json:"duration_ms"`
	PythonDurationMS float64 `json:"python_duration_ms"`
	BridgeCalls      int     `json:"bridge_calls"`
	TimedOut         bool    `json:"timed_out"`
	Truncated        bool    `json:"truncated"`
}

// executionResult converts what Execute returned.
func executionResult(ce *supervisor.CodeExecution, err error) *execution {
	r := &execution{
		// Bytes that are not UTF-8 (sys.stdout.buffer.write) as Python's
		// decoder replaces them: one U+FFFD per maximal ill-formed part,
		// not one per byte as encoding/json writes them.
		Stdout:           pytext.Replace(ce.Stdout),
		Stderr:           pytext.Replace(ce.Stderr),
		Error:            nullable(ce.Error),
		ErrorType:        nullable(ce.ErrorType),
		Traceback:        nullable(ce.Traceback),
		DurationMS:       millis(ce.Duration),
		PythonDurationMS: millis(ce.PythonDuration),
		BridgeCalls:      ce.BridgeCalls,
		TimedOut:         errors.Is(err, supervisor.ErrTimeout),
		Truncated:        ce.Truncated,
	}
	return r
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}
