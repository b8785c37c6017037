package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// failingReader yields data, then fails with err (io.EOF: the input ends).
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// newTestServer is a server writing to out, as serve --stdio makes one.
func newTestServer(t *testing.T, out io.Writer) *server {
	t.Helper()
	s := newServer(t.Context(), out, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.cancel(nil) })
	return s
}

// TestReadLoopPartialLine: a last line without its newline is handled
// when the input ends, not when a read fails (a deadline passed, the
// connection broke) with half a line read.
func TestReadLoopPartialLine(t *testing.T) {
	const version = `{"jsonrpc":"2.0","id":7,"method":"version"}`
	t.Run("end of input", func(t *testing.T) {
		var out bytes.Buffer
		s := newTestServer(t, &out)
		if err := s.readLoop(&failingReader{[]byte(version), io.EOF}); err != nil {
			t.Fatalf("readLoop: %v", err)
		}
		if !strings.Contains(out.String(), `"id":7,"result"`) {
			t.Fatalf("the last line, without its newline, was not answered: %q", out.String())
		}
	})
	t.Run("read error", func(t *testing.T) {
		var out bytes.Buffer
		s := newTestServer(t, &out)
		err := s.readLoop(&failingReader{[]byte(version), os.ErrDeadlineExceeded})
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("readLoop: %v, want the read's error", err)
		}
		if out.Len() != 0 {
			t.Fatalf("a line cut short by a failed read was handled: %q", out.String())
		}
	})
}

// countingReader yields b without end, counting what it yields.
type countingReader struct {
	b    byte
	read int
}

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.b
	}
	r.read += len(p)
	return len(p), nil
}

// TestReadLoopBeforeAuthenticate: until a session that needs a token has
// authenticated, a line longer than preAuthMaxMessage is refused (and the
// session ends) without being read to its end; afterwards --max-message
// applies.
func TestReadLoopBeforeAuthenticate(t *testing.T) {
	const token = "t0ken"
	t.Run("long first line", func(t *testing.T) {
		var out bytes.Buffer
		s := newTestServer(t, &out)
		s.token, s.maxMessage = []byte(token), 64<<20
		in := &countingReader{b: 'a'}
		if err := s.readLoop(in); !errors.Is(err, errUnauthorized) {
			t.Fatalf("readLoop: %v, want errUnauthorized", err)
		}
		if in.read > 4*preAuthMaxMessage {
			t.Errorf("read %d bytes of an unauthenticated line, want about %d at most", in.read, preAuthMaxMessage)
		}
		if !strings.Contains(out.String(), `"code":-32005`) || !strings.Contains(out.String(), `"kind":"unauthorized"`) {
			t.Errorf("answered %q, want the unauthorized error", out.String())
		}
	})
	t.Run("long line once authenticated", func(t *testing.T) {
		var out bytes.Buffer
		s := newTestServer(t, &out)
		s.token, s.maxMessage = []byte(token), 64<<20
		in := `{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"` + token + `"}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"version","params":{"padding":"` + strings.Repeat("a", 4*preAuthMaxMessage) + `"}}` + "\n"
		if err := s.readLoop(strings.NewReader(in)); err != nil {
			t.Fatalf("readLoop: %v", err)
		}
		if !strings.Contains(out.String(), `"id":1,"result":{}`) || !strings.Contains(out.String(), `"id":2,"error":{"code":-32602`) {
			t.Fatalf("answered %q, want {} and version's unknown parameter", out.String())
		}
	})
}
