package ipc

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of these with
// context; test for them with errors.Is.
var (
	// ErrFrameTooLarge reports a frame whose length exceeds MaxFrameSize,
	// either announced by an incoming header or produced by an encoder.
	// After a read fails with it the stream is out of sync and unusable.
	ErrFrameTooLarge = errors.New("ipc: frame too large")

	// ErrMalformed reports bytes that are not a well-formed message or
	// value: bad msgpack, a field of the wrong type, a missing or extra
	// envelope element, trailing bytes, an unknown field, and so on.
	ErrMalformed = errors.New("ipc: malformed input")

	// ErrUnknownKind reports a message whose envelope is well formed but
	// whose Kind this version of the protocol does not define.
	ErrUnknownKind = errors.New("ipc: unknown message kind")

	// ErrBodyMismatch reports a body whose Go type does not belong to the
	// message kind it was paired with (Encode, Message.Into).
	ErrBodyMismatch = errors.New("ipc: body does not match message kind")

	// ErrUnsupportedValue reports a Go value that EncodeValue cannot
	// represent (for example a struct, a channel or a function).
	ErrUnsupportedValue = errors.New("ipc: unsupported value")

	// ErrTooDeep reports a value nested deeper than MaxDepth. When
	// decoding it is also an ErrMalformed, when encoding also an
	// ErrUnsupportedValue.
	ErrTooDeep = errors.New("ipc: value nested too deeply")

	// ErrProtocolMismatch reports a Hello whose ProtocolVersion differs
	// from ProtocolVersion (see CheckHello).
	ErrProtocolMismatch = errors.New("ipc: protocol version mismatch")

	// ErrPageTooSmall reports a file too small to hold the interrupt word.
	ErrPageTooSmall = errors.New("ipc: interrupt page too small")
)

// malformedError is an ErrMalformed with a description of what was wrong.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return ErrMalformed.Error() + ": " + e.msg }
func (e *malformedError) Unwrap() error { return ErrMalformed }

// malformedf returns an error wrapping ErrMalformed.
func malformedf(format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf(format, args...)}
}

// unsupportedf returns an error wrapping ErrUnsupportedValue.
func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupportedValue, fmt.Sprintf(format, args...))
}

// tooDeepError is ErrTooDeep, additionally matching also (ErrMalformed when
// decoding, ErrUnsupportedValue when encoding).
type tooDeepError struct{ also error }

func (e tooDeepError) Error() string {
	return fmt.Sprintf("%v: more than %d levels", ErrTooDeep, MaxDepth)
}

func (e tooDeepError) Is(target error) bool { return target == ErrTooDeep || target == e.also }

// messageError is a human-readable message that wraps a sentinel without
// repeating its text.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }
