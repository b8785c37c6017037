package ipc

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// sampleBodies has one non-trivial body per kind.
var sampleBodies = map[Kind]any{
	KindHello:           Hello{ProtocolVersion: ProtocolVersion, PythonVersion: "3.12.7", PyodideVersion: "0.27.2", PID: 4242},
	KindError:           Error{Message: "no such kind", Code: CodeUnknownKind},
	KindInitialize:      Initialize{Context: strings.Repeat("context ", 1000)},
	KindInitializeReply: InitializeReply{},
	KindExecute:         Execute{Code: "print('héllo')\nx = 1 + 1"},
	KindOutput:          Output{Stream: StreamStderr, Data: "warning\n"},
	KindResult: Result{
		Error: "division by zero", ErrorType: "ZeroDivisionError",
		Traceback: "Traceback (most recent call last):\n...", DurationNanos: 1234567,
	},
	KindGetVariable: GetVariable{Name: "answer"},
	KindGetVariableReply: GetVariableReply{Found: true, Value: map[string]any{
		"list": []any{int64(1), "two", 3.5, nil, true},
		"big":  bigInt("-123456789012345678901234567890"),
		"set":  Set{int64(1), int64(2)},
		"dict": Dict{{Key: int64(1), Value: "one"}, {Key: []any{"t", int64(2)}, Value: []byte{0xff}}},
	}},
	KindSetVariable:      SetVariable{Name: "x", Value: []any{int64(-1), math.Inf(1)}},
	KindSetVariableReply: SetVariableReply{},
	KindBridgeCall: BridgeCall{Method: "llm_query", Args: []any{"What is 2+2?"},
		Kwargs: map[string]any{"model": "small", "temperature": 0.5}},
	KindBridgeReply: BridgeReply{Result: "4"},
	KindPing:        Ping{},
	KindPong:        Pong{},
	KindStats:       Stats{},
	KindStatsReply: StatsReply{RSSBytes: 300 << 20, HeapBytes: 12 << 20, LinearMemoryBytes: 256 << 20,
		Executions: 17, UptimeNanos: math.MaxInt64},
	KindShutdown:      Shutdown{},
	KindStage:         Stage{Data: "part\xff"},
	KindComplete:      Complete{Source: "if x:"},
	KindCompleteReply: CompleteReply{Complete: true},
}

func bigInt(s string) *big.Int {
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("bad big int " + s)
	}
	return x
}

func TestEveryKindHasSample(t *testing.T) {
	for k := range kinds {
		if kinds[k].codec == nil {
			continue
		}
		if _, ok := sampleBodies[Kind(k)]; !ok {
			t.Errorf("no sample body for %s", Kind(k))
		}
	}
	if len(sampleBodies) != int(KindCompleteReply) {
		t.Errorf("%d samples for %d kinds", len(sampleBodies), KindCompleteReply)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for kind, body := range sampleBodies {
		t.Run(kind.String(), func(t *testing.T) {
			for _, id := range []uint64{0, 1, math.MaxUint32 + 1, math.MaxUint64} {
				frame, err := Encode(kind, id, body)
				if err != nil {
					t.Fatal(err)
				}
				m, err := Decode(frame)
				if err != nil {
					t.Fatal(err)
				}
				if m.Kind != kind || m.ID != id {
					t.Fatalf("got %s %d, want %s %d", m.Kind, m.ID, kind, id)
				}
				if !reflect.DeepEqual(m.Body, body) {
					t.Fatalf("body changed:\n got %#v\nwant %#v", m.Body, body)
				}
				// Into a pointer of the right type.
				ptr := reflect.New(reflect.TypeOf(body))
				if err := m.Into(ptr.Interface()); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(ptr.Elem().Interface(), body) {
					t.Fatal("Into stored a different body")
				}
				// A pointer body encodes like the value.
				frame2, err := Encode(kind, id, ptr.Interface())
				if err != nil || string(frame2) != string(frame) {
					t.Fatalf("pointer body encodes differently: %v", err)
				}
			}
		})
	}
}

func TestZeroBodies(t *testing.T) {
	for kind, body := range sampleBodies {
		zero := reflect.Zero(reflect.TypeOf(body)).Interface()
		frame, err := Encode(kind, 3, nil)
		if err != nil {
			if kind == KindOutput && errors.Is(err, ErrMalformed) {
				continue // the zero Output has no stream
			}
			t.Fatalf("%s: %v", kind, err)
		}
		m, err := Decode(frame)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !reflect.DeepEqual(m.Body, zero) {
			t.Fatalf("%s: got %#v, want %#v", kind, m.Body, zero)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindHello: "hello", KindGetVariableReply: "get_variable_reply", 0: "Kind(0)", 99: "Kind(99)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		body any
		want error
	}{
		{"unknown kind", 0, nil, ErrUnknownKind},
		{"undefined kind", 200, nil, ErrUnknownKind},
		{"wrong body", KindExecute, Result{}, ErrBodyMismatch},
		{"wrong body pointer", KindExecute, &Result{}, ErrBodyMismatch},
		{"nil pointer body", KindExecute, (*Execute)(nil), ErrBodyMismatch},
		{"not a struct", KindExecute, "print(1)", ErrBodyMismatch},
		{"bad stream", KindOutput, Output{Stream: "stdin"}, ErrMalformed},
		{"unsupported value", KindSetVariable, SetVariable{Value: struct{}{}}, ErrUnsupportedValue},
		{"unsupported arg", KindBridgeCall, BridgeCall{Args: []any{make(chan int)}}, ErrUnsupportedValue},
		{"field too large", KindExecute, Execute{Code: strings.Repeat("x", MaxFrameSize+1)}, ErrFrameTooLarge},
		{"frame too large", KindExecute, Execute{Code: string(make([]byte, MaxFrameSize))}, ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encode(tt.kind, 1, tt.body)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestIntoErrors(t *testing.T) {
	m := Message{Kind: KindExecute, ID: 1, Body: Execute{Code: "1"}}
	var r Result
	var ex Execute
	for _, v := range []any{nil, ex, &r, (*Execute)(nil)} {
		if err := m.Into(v); !errors.Is(err, ErrBodyMismatch) {
			t.Errorf("Into(%T): got %v, want ErrBodyMismatch", v, err)
		}
	}
	if err := (Message{Kind: KindPing}).Into(&Ping{}); !errors.Is(err, ErrBodyMismatch) {
		t.Errorf("Into on a body-less message: got %v", err)
	}
}

// mp marshals v with the reference msgpack library, to build frames this
// package would never write.
// mp encodes v with the reference msgpack library, maps with their keys
// sorted (as EncodeValue writes them: a string-keyed map in another
// order decodes as a Dict).
func mp(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(KindExecute, 5, Execute{Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		frame  []byte
		want   error
		wantID uint64 // ID the partial Message must carry, if not 0
	}{
		{"empty", nil, ErrMalformed, 0},
		{"garbage", []byte("\xc1\xff\x00garbage"), ErrMalformed, 0},
		{"truncated", good[:len(good)-1], ErrMalformed, 5},
		{"truncated envelope", good[:2], ErrMalformed, 0},
		{"trailing bytes", append(append([]byte{}, good...), 0xc0), ErrMalformed, 5},
		{"not an array", mp(t, map[string]any{"kind": 5}), ErrMalformed, 0},
		{"two elements", mp(t, []any{5, 1}), ErrMalformed, 0},
		{"four elements", mp(t, []any{5, 1, map[string]any{}, nil}), ErrMalformed, 0},
		{"kind as string", mp(t, []any{"execute", 1, map[string]any{"code": "1"}}), ErrMalformed, 0},
		{"kind as float", mp(t, []any{5.0, 1, map[string]any{"code": "1"}}), ErrMalformed, 0},
		{"negative kind", mp(t, []any{-5, 1, map[string]any{"code": "1"}}), ErrMalformed, 0},
		{"negative id", mp(t, []any{5, -1, map[string]any{"code": "1"}}), ErrMalformed, 0},
		{"id as string", mp(t, []any{5, "1", map[string]any{"code": "1"}}), ErrMalformed, 0},
		{"unknown kind", mp(t, []any{99, 7, map[string]any{}}), ErrUnknownKind, 7},
		{"kind zero", mp(t, []any{0, 7, map[string]any{}}), ErrUnknownKind, 7},
		{"kind above 255", mp(t, []any{1000, 7, map[string]any{}}), ErrUnknownKind, 7},
		{"body nil", mp(t, []any{5, 7, nil}), ErrMalformed, 7},
		{"body array", mp(t, []any{5, 7, []any{"1"}}), ErrMalformed, 7},
		{"field wrong type", mp(t, []any{5, 7, map[string]any{"code": 1}}), ErrMalformed, 7},
		{"field nil", mp(t, []any{5, 7, map[string]any{"code": nil}}), ErrMalformed, 7},
		{"field bytes for string", mp(t, []any{5, 7, map[string]any{"code": []byte("1")}}), ErrMalformed, 7},
		{"unknown field", mp(t, []any{5, 7, map[string]any{"code": "1", "extra": 1}}), ErrMalformed, 7},
		{"non-string key", mp(t, []any{5, 7, map[int]any{1: "1"}}), ErrMalformed, 7},
		{"duplicate field", []byte{0x93, 5, 7, 0x82, 0xa4, 'c', 'o', 'd', 'e', 0xa1, '1', 0xa4, 'c', 'o', 'd', 'e', 0xa1, '2'}, ErrMalformed, 7},
		{"bool as int", mp(t, []any{KindResult, 7, map[string]any{"timeout": 1}}), ErrMalformed, 7},
		{"int as float", mp(t, []any{KindResult, 7, map[string]any{"duration_ns": 1.5}}), ErrMalformed, 7},
		{"int as bool", mp(t, []any{KindResult, 7, map[string]any{"duration_ns": true}}), ErrMalformed, 7},
		{"int overflow", mp(t, []any{KindResult, 7, map[string]any{"duration_ns": uint64(math.MaxUint64)}}), ErrMalformed, 7},
		{"uint negative", mp(t, []any{KindStatsReply, 7, map[string]any{"rss": -1}}), ErrMalformed, 7},
		{"bad stream", mp(t, []any{KindOutput, 7, map[string]any{"stream": "stdin", "data": "x"}}), ErrMalformed, 7},
		{"args not a list", mp(t, []any{KindBridgeCall, 7, map[string]any{"args": "x"}}), ErrMalformed, 7},
		{"kwargs not string-keyed", mp(t, []any{KindBridgeCall, 7, map[string]any{"kwargs": map[int]any{1: 2}}}), ErrMalformed, 7},
		{"bad value", []byte{0x93, 10, 7, 0x81, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xc1}, ErrMalformed, 7},
		{"hostile array length", []byte{0x93, 10, 7, 0x81, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xdd, 0xff, 0xff, 0xff, 0xff}, ErrMalformed, 7},
		{"hostile string length", []byte{0x93, 5, 7, 0x81, 0xa4, 'c', 'o', 'd', 'e', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'}, ErrMalformed, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(tt.frame)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if m.Body != nil {
				t.Fatalf("failed decode returned body %#v", m.Body)
			}
			if m.ID != tt.wantID {
				t.Fatalf("got ID %d, want %d", m.ID, tt.wantID)
			}
			if !strings.HasPrefix(err.Error(), "ipc: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestDecodeHelloLenient(t *testing.T) {
	frame := mp(t, []any{KindHello, 0, map[string]any{
		"proto": ProtocolVersion + 1, "python": "3.13.0", "pyodide": "0.28.0", "pid": 99,
		"new_field": map[string]any{"nested": []any{1, 2, 3}},
	}})
	m, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Body.(Hello)
	if h.ProtocolVersion != ProtocolVersion+1 || h.PID != 99 {
		t.Fatalf("got %+v", h)
	}
	if err := CheckHello(h); !errors.Is(err, ErrProtocolMismatch) {
		t.Fatalf("got %v, want ErrProtocolMismatch", err)
	}
}

// TestWireInterop checks that the frames are plain msgpack: the reference
// library reads what Encode writes, and Decode reads what it writes.
func TestWireInterop(t *testing.T) {
	frame, err := Encode(KindExecute, 9, Execute{Code: "x = 1"})
	if err != nil {
		t.Fatal(err)
	}
	var env []any
	if err := msgpack.Unmarshal(frame, &env); err != nil {
		t.Fatal(err)
	}
	want := []any{int8(KindExecute), int8(9), map[string]any{"code": "x = 1", "interactive": false}}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("reference decoder saw %#v, want %#v", env, want)
	}

	type result struct {
		ErrorType string `msgpack:"error_type"`
		Duration  int64  `msgpack:"duration_ns"`
	}
	m, err := Decode(mp(t, []any{KindResult, uint64(1) << 40, result{"hi\n", 42}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Body.(Result); got.ErrorType != "hi\n" || got.DurationNanos != 42 || m.ID != 1<<40 {
		t.Fatalf("got %+v", m)
	}
}
