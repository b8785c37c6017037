package ipc

import (
	"errors"
	"testing"
)

func TestCheckHello(t *testing.T) {
	if err := CheckHello(Hello{ProtocolVersion: ProtocolVersion}); err != nil {
		t.Fatalf("same version: %v", err)
	}
	err := CheckHello(Hello{ProtocolVersion: 6})
	if !errors.Is(err, ErrProtocolMismatch) {
		t.Fatalf("got %v, want ErrProtocolMismatch", err)
	}
	want := "rlm-worker speaks protocol 6, this supervisor speaks 5: rebuild the worker (make) so both come from the same version"
	if err.Error() != want {
		t.Fatalf("got %q\nwant %q", err, want)
	}
	if err := CheckHello(Hello{}); !errors.Is(err, ErrProtocolMismatch) {
		t.Fatalf("missing version: got %v", err)
	}
}
