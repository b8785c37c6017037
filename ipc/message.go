package ipc

import (
	"encoding/binary"
	"fmt"
	"reflect"
)

// Kind identifies a message type and thereby its body type. Kinds are
// numbered explicitly; KindHello is 1 in every protocol version.
type Kind uint8

// Message kinds. Each comment names the kind's body type and its
// direction: S→W supervisor to worker, W→S worker to supervisor.
const (
	KindHello            Kind = 1  // Hello, W→S, first frame, ID 0
	KindError            Kind = 2  // Error, either way, in reply to a failed request
	KindInitialize       Kind = 3  // Initialize, S→W
	KindInitializeReply  Kind = 4  // InitializeReply, W→S
	KindExecute          Kind = 5  // Execute, S→W
	KindOutput           Kind = 6  // Output, W→S, streamed during an Execute
	KindResult           Kind = 7  // Result, W→S, ends an Execute
	KindGetVariable      Kind = 8  // GetVariable, S→W
	KindGetVariableReply Kind = 9  // GetVariableReply, W→S
	KindSetVariable      Kind = 10 // SetVariable, S→W
	KindSetVariableReply Kind = 11 // SetVariableReply, W→S
	KindBridgeCall       Kind = 12 // BridgeCall, W→S, during an Execute
	KindBridgeReply      Kind = 13 // BridgeReply, S→W
	KindPing             Kind = 14 // Ping, S→W
	KindPong             Kind = 15 // Pong, W→S
	KindStats            Kind = 16 // Stats, S→W
	KindStatsReply       Kind = 17 // StatsReply, W→S
	KindShutdown         Kind = 18 // Shutdown, S→W, no reply
	KindStage            Kind = 19 // Stage, S→W, no reply
	KindComplete         Kind = 20 // Complete, S→W
	KindCompleteReply    Kind = 21 // CompleteReply, W→S
)

// kindInfo describes one defined Kind.
type kindInfo struct {
	name   string
	codec  *structCodec
	decode func(*structCodec, reader) (any, reader, error) // decodeBody of the body type
}

// kinds is indexed by Kind; undefined kinds have a nil codec.
var kinds = buildKinds()

func buildKinds() [KindCompleteReply + 1]kindInfo {
	defs := []kindDef{
		// Hello ignores unknown fields so that a newer worker's Hello
		// still decodes and CheckHello can explain the mismatch.
		defineKind[Hello](KindHello, "hello", true),
		defineKind[Error](KindError, "error", false),
		defineKind[Initialize](KindInitialize, "initialize", false),
		defineKind[InitializeReply](KindInitializeReply, "initialize_reply", false),
		defineKind[Execute](KindExecute, "execute", false),
		defineKind[Output](KindOutput, "output", false),
		defineKind[Result](KindResult, "result", false),
		defineKind[GetVariable](KindGetVariable, "get_variable", false),
		defineKind[GetVariableReply](KindGetVariableReply, "get_variable_reply", false),
		defineKind[SetVariable](KindSetVariable, "set_variable", false),
		defineKind[SetVariableReply](KindSetVariableReply, "set_variable_reply", false),
		defineKind[BridgeCall](KindBridgeCall, "bridge_call", false),
		defineKind[BridgeReply](KindBridgeReply, "bridge_reply", false),
		defineKind[Ping](KindPing, "ping", false),
		defineKind[Pong](KindPong, "pong", false),
		defineKind[Stats](KindStats, "stats", false),
		defineKind[StatsReply](KindStatsReply, "stats_reply", false),
		defineKind[Shutdown](KindShutdown, "shutdown", false),
		defineKind[Stage](KindStage, "stage", false),
		defineKind[Complete](KindComplete, "complete", false),
		defineKind[CompleteReply](KindCompleteReply, "complete_reply", false),
	}
	var table [KindCompleteReply + 1]kindInfo
	for _, d := range defs {
		table[d.kind] = d.info
	}
	return table
}

// kindDef is one row of the kinds table.
type kindDef struct {
	kind Kind
	info kindInfo
}

// defineKind describes the kind whose body type is T. The codec and the
// decoder come from the same T, so that the decoder's writes at the
// codec's field offsets always land in a T.
func defineKind[T any](kind Kind, name string, lenient bool) kindDef {
	c, err := newStructCodec(reflect.TypeFor[T](), lenient)
	if err != nil {
		panic(err) // a bug in the table above, caught by every test
	}
	return kindDef{kind, kindInfo{name: name, codec: c, decode: decodeBody[T]}}
}

// lookupKind returns the description of a defined kind.
func lookupKind(k uint64) (kindInfo, bool) {
	if k >= uint64(len(kinds)) || kinds[k].codec == nil {
		return kindInfo{}, false
	}
	return kinds[k], true
}

// String returns the kind's name, such as "execute" for KindExecute, or
// "Kind(N)" for an undefined kind. Names are for logs; the wire carries
// the number.
func (k Kind) String() string {
	if info, ok := lookupKind(uint64(k)); ok {
		return info.name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is a decoded frame.
//
// On the wire a message is a msgpack array of exactly three elements:
// [kind (unsigned integer), id (unsigned integer), body (map)]. The body map
// holds the body struct's fields under their msgpack tag names.
type Message struct {
	// Kind says what Body holds.
	Kind Kind
	// ID matches replies to requests: a reply, an Error, and every
	// Output of an Execute carry the ID of the request they answer.
	ID uint64
	// Body is the body struct for Kind, by value: Execute for
	// KindExecute, Result for KindResult, and so on.
	Body any
}

// Into stores m.Body in *v, which must be a pointer to m.Kind's body type:
//
//	var ex ipc.Execute
//	if err := m.Into(&ex); err != nil { ... }
//
// A mismatch is an error wrapping ErrBodyMismatch.
func (m Message) Into(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("ipc: %w: Into needs a non-nil pointer, got %T", ErrBodyMismatch, v)
	}
	if m.Body == nil {
		return fmt.Errorf("ipc: %w: %s message has no body", ErrBodyMismatch, m.Kind)
	}
	bv := reflect.ValueOf(m.Body)
	if rv.Elem().Type() != bv.Type() {
		return fmt.Errorf("ipc: %w: %s body is %T, not %s", ErrBodyMismatch, m.Kind, m.Body, rv.Elem().Type())
	}
	rv.Elem().Set(bv)
	return nil
}

// Encode returns the frame body (without length prefix) for a message.
// body must be kind's body type, a non-nil pointer to it, or nil for its
// zero value; anything else fails with ErrBodyMismatch. An undefined kind
// fails with ErrUnknownKind, a body over MaxFrameSize with
// ErrFrameTooLarge, and a value field EncodeValue cannot represent with
// ErrUnsupportedValue.
func Encode(kind Kind, id uint64, body any) ([]byte, error) {
	return appendMessage(nil, kind, id, body)
}

// AppendFrame appends a message to dst as a whole frame: the 4-byte
// length, then the body Encode would return. It fails as Encode does, and
// then returns dst as it was.
func AppendFrame(dst []byte, kind Kind, id uint64, body any) ([]byte, error) {
	start := len(dst)
	b, err := appendMessage(append(dst, 0, 0, 0, 0), kind, id, body)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-headerSize))
	return b, nil
}

// appendMessage appends the frame body of a message to dst.
func appendMessage(dst []byte, kind Kind, id uint64, body any) ([]byte, error) {
	info, ok := lookupKind(uint64(kind))
	if !ok {
		return nil, fmt.Errorf("ipc: encode: %w %d", ErrUnknownKind, uint8(kind))
	}
	bv, err := bodyValue(info, body)
	if err != nil {
		return nil, fmt.Errorf("ipc: encode %s: %w", kind, err)
	}
	if v, ok := bv.Interface().(validator); ok {
		if err := v.validate(); err != nil {
			return nil, fmt.Errorf("ipc: encode %s: %w", kind, err)
		}
	}
	start := len(dst)
	w := writer{b: dst}
	w.arrayLen(3)
	w.uint(uint64(kind))
	w.uint(id)
	if err := info.codec.encode(&w, bv); err != nil {
		return nil, fmt.Errorf("ipc: encode %s: %w", kind, err)
	}
	if n := len(w.b) - start; n > MaxFrameSize {
		return nil, fmt.Errorf("ipc: encode %s: %w", kind, frameTooLarge(n))
	}
	return w.b, nil
}

// bodyValue checks that body suits the kind and returns it as a struct
// value.
func bodyValue(info kindInfo, body any) (reflect.Value, error) {
	if body == nil {
		return reflect.New(info.codec.typ).Elem(), nil
	}
	v := reflect.ValueOf(body)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Type() != info.codec.typ {
		return reflect.Value{}, fmt.Errorf("%w: body is %T, want %s", ErrBodyMismatch, body, info.codec.typ)
	}
	return v, nil
}

// Decode parses a frame body (as returned by Reader.ReadFrame) into a
// Message whose Body is the kind's body struct.
//
// Decoding is strict. Anything but a three-element array of unsigned kind,
// unsigned ID and body map fails with ErrMalformed, as do trailing bytes,
// unknown or repeated body fields (except in Hello, which skips unknown
// fields), and field values of the wrong msgpack type. A kind this
// version does not define fails with ErrUnknownKind. When the kind and ID
// could be read, the returned Message carries them even on error (with a
// nil Body), so that the receiver can send an Error reply to the right
// request.
func Decode(frame []byte) (Message, error) {
	return decode(frame, false)
}

// decode is Decode; owned says frame is never written again, so the
// message's strings may share its memory.
func decode(frame []byte, owned bool) (Message, error) {
	r := reader{buf: frame, owned: owned}
	n, err := r.readArrayLen()
	if err != nil {
		return Message{}, fmt.Errorf("ipc: decode envelope: %w", err)
	}
	if n != 3 {
		return Message{}, fmt.Errorf("ipc: decode envelope: %w", malformedf("%d elements, want 3 (kind, id, body)", n))
	}
	k, err := r.readUint()
	if err != nil {
		return Message{}, fmt.Errorf("ipc: decode envelope kind: %w", err)
	}
	id, err := r.readUint()
	if err != nil {
		return Message{}, fmt.Errorf("ipc: decode envelope id: %w", err)
	}
	var m Message
	if k <= uint64(^Kind(0)) {
		m.Kind = Kind(k)
	}
	m.ID = id
	info, ok := lookupKind(k)
	if !ok {
		return m, fmt.Errorf("ipc: decode message %d: %w %d", id, ErrUnknownKind, k)
	}
	body, r, err := info.decode(info.codec, r)
	if err != nil {
		return m, fmt.Errorf("ipc: decode %s %d: %w", m.Kind, id, err)
	}
	if r.remaining() != 0 {
		return m, fmt.Errorf("ipc: decode %s %d: %w", m.Kind, id, malformedf("%d trailing bytes", r.remaining()))
	}
	if v, ok := body.(validator); ok {
		if err := v.validate(); err != nil {
			return m, fmt.Errorf("ipc: decode %s %d: %w", m.Kind, id, err)
		}
	}
	m.Body = body
	return m, nil
}
