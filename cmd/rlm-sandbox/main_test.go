package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// testStreams are iostreams over buffers, stdin not a terminal.
func testStreams(stdin string) (*iostreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &iostreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}, &out, &errOut
}

func TestExitCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("-c: %w", err) }
	cases := []struct {
		err  error
		code int
	}{
		{nil, 0},
		{errPython, 1},
		{usageErrorf("bad"), 2},
		{wrap(supervisor.ErrTimeout), 124},
		{wrap(supervisor.ErrCanceled), 130},
		{&signalError{os.Interrupt}, 130},
		{&signalError{syscall.SIGTERM}, 143},
		{wrap(supervisor.ErrWorkerExited), 3},
		{wrap(supervisor.ErrDead), 3},
		{wrap(supervisor.ErrWorkerUnavailable), 3},
		{wrap(runtime.ErrDistribution), 3},
		{errors.New("anything else"), 3},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}

// TestExecSources checks, in-process, that -c and files keep their order
// and which combinations are usage errors.
func TestExecSources(t *testing.T) {
	cases := []struct {
		args  []string
		stdin string
		want  []string // names of the sources, or nil for a usage error
	}{
		{[]string{"-c", "a"}, "", []string{"-c"}},
		{[]string{"-c", "a", "f.py", "-c", "b", "g.py"}, "", []string{"-c #1", "f.py", "-c #2", "g.py"}},
		{[]string{"f.py", "-c", "a", "--timeout", "1s", "-", "-c", "b"}, "", []string{"f.py", "-c #1", "<stdin>", "-c #2"}},
		{nil, "print(1)", []string{"<stdin>"}},
		{[]string{"-", "-"}, "", nil},
		{[]string{"--context-file", "-"}, "", nil},
		{[]string{"-", "--context-json", "-"}, "", nil},
		{[]string{"-c", "a", "--context-file", "-"}, "", []string{"-c"}},
	}
	for _, c := range cases {
		ios, _, _ := testStreams(c.stdin)
		var got *execOptions
		cmd := newExecCmd(ios, &globalOptions{}, func(o *execOptions) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.want == nil {
			if !errors.Is(err, errUsage) {
				t.Errorf("%q: err %v, want a usage error", c.args, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		var names []string
		for _, s := range got.sources {
			names = append(names, s.name)
		}
		if !reflect.DeepEqual(names, c.want) {
			t.Errorf("%q: sources %q, want %q", c.args, names, c.want)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"exec", "--nope"}, {"repl", "x"}, {"serve"}, {"exec", "--memory-limit", "1X", "-c", "1"}} {
		ios, _, errOut := testStreams("")
		if code := run(args, ios); code != exitUsage || !strings.Contains(errOut.String(), "--help") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	cases := map[string]uint64{"0": 0, "1024": 1024, "4K": 4096, "512M": 512 << 20, "512MiB": 512 << 20, "2g": 2 << 30, "1GB": 1 << 30}
	for in, want := range cases {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "lots", "-1", "1.5G", "99999999999T"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) accepted", in)
		}
	}
}

func TestJSONValues(t *testing.T) {
	v, err := parseValue([]byte(`{"i": 1, "big": 123456789012345678901234567890, "f": 1.5, "e": 1e3, "a": [true, null, "s"]}`))
	if err != nil {
		t.Fatal(err)
	}
	big, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	want := runtime.Dict{{Key: "i", Value: int64(1)}, {Key: "big", Value: big}, {Key: "f", Value: 1.5}, {Key: "e", Value: 1000.0},
		{Key: "a", Value: []any{true, nil, "s"}}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("%#v", v)
	}
	for _, bad := range []string{"", "1 2", "{", "nul"} {
		if _, err := parseValue([]byte(bad)); err == nil {
			t.Errorf("parseValue(%q) accepted", bad)
		}
	}

	py := map[string]any{
		"tuple": runtime.Tuple{int64(1), "a"},
		"set":   runtime.Set{int64(2)},
		"dict":  runtime.Dict{{Key: int64(1), Value: true}, {Key: nil, Value: 1.5}, {Key: runtime.Tuple{int64(1), int64(2)}, Value: "t"}},
		"bytes": []byte("h\xffi"),
		"nan":   math.NaN(),
		"inf":   math.Inf(-1),
		"cplx":  complex(1, -2),
		"imag":  complex(0, 3),
		"big":   big,
		// 'a\udc80b' (the guest's surrogatepass UTF-8): one character,
		// one U+FFFD; an invalid byte, one each.
		"surr": "a\xed\xb2\x80b\xff\xfe",
	}
	b, err := json.Marshal(toJSON(py))
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"big":123456789012345678901234567890,"bytes":"h�i","cplx":"(1-2j)","dict":{"1":true,"null":1.5,"[1,2]":"t"},"imag":"3j","inf":"-inf","nan":"nan","set":[2],"surr":"a�b��","tuple":[1,"a"]}`
	if string(b) != wantJSON {
		t.Fatalf("got  %s\nwant %s", b, wantJSON)
	}
}
