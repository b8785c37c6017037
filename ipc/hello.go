package ipc

import "fmt"

// ProtocolVersion is the version of the protocol this package implements.
// It changes whenever a change to the frame format, a kind or a body would
// make an older peer misread a newer one. Two things never change, so that
// any two versions can at least compare versions: the envelope (a
// three-element array of kind, ID and body), the number of KindHello, and
// the existing fields of Hello (new fields may be added; decoding Hello
// ignores fields it does not know).
const ProtocolVersion = 5

// CheckHello reports whether the worker that sent h speaks this package's
// ProtocolVersion. The error, which wraps ErrProtocolMismatch, is meant to
// be shown to the user as is.
func CheckHello(h Hello) error {
	if h.ProtocolVersion == ProtocolVersion {
		return nil
	}
	var msg string
	if h.ProtocolVersion == 0 {
		msg = fmt.Sprintf("rlm-worker did not report a protocol version, this supervisor speaks %d: "+
			"rebuild the worker (make) so both come from the same version", ProtocolVersion)
	} else {
		msg = fmt.Sprintf("rlm-worker speaks protocol %d, this supervisor speaks %d: "+
			"rebuild the worker (make) so both come from the same version", h.ProtocolVersion, ProtocolVersion)
	}
	return &messageError{msg: msg, err: ErrProtocolMismatch}
}
