// Package ipc defines how an rlm-sandbox supervisor and its rlm-worker
// process talk: the frame format on the worker's stdin and stdout, the
// messages carried in those frames, the encoding of Python values inside
// messages, and the shared interrupt page. It knows nothing about wazero,
// Pyodide or process management.
//
// # Frames
//
// Each direction of the pipe is a sequence of frames:
//
//	+----------------------+---------------------------+
//	| length: uint32, BE   | body: length bytes        |
//	+----------------------+---------------------------+
//
// The length counts only the body and must not exceed MaxFrameSize (64
// MiB). Reader rejects a larger length with ErrFrameTooLarge before
// reading or allocating the body, and grows its buffer only as body bytes
// actually arrive. A stream that ends between frames yields io.EOF, one
// that ends inside a frame an error wrapping io.ErrUnexpectedEOF. Writer
// is safe for concurrent use; concurrent writes share system calls.
//
// # Messages
//
// A frame body is one msgpack array of exactly three elements:
//
//	[kind, id, body]
//
// kind is an unsigned integer naming the message type (see Kind), id an
// unsigned integer that matches replies to requests, and body a msgpack map
// holding the fields of the kind's body struct under their msgpack tag
// names (Execute{Code} is {"code": "..."}). Encode and Decode convert
// between frame bodies and Message values. Decoding is strict: wrong
// types, unknown or repeated fields, trailing bytes and undefined kinds are
// errors (ErrMalformed, ErrUnknownKind), never panics, and the package's
// own msgpack reader checks every length against the bytes present before
// allocating.
//
// A session runs as follows (S supervisor, W worker):
//
//	W→S Hello                 first frame; S calls CheckHello
//	S→W Initialize            → InitializeReply
//	S→W Execute               → Output* (streamed), BridgeCall*, → Result
//	W→S BridgeCall            → BridgeReply (S answers while Execute runs)
//	S→W GetVariable           → GetVariableReply
//	S→W SetVariable           → SetVariableReply
//	S→W Ping                  → Pong
//	S→W Stats                 → StatsReply
//	S→W Shutdown              worker exits, no reply
//
// Any request may instead be answered by Error with the request's ID.
// Requests from each side number their IDs independently; a reply, and
// every Output of an Execute, carries the ID of its request.
//
// The worker serves one request at a time and, while it serves one, reads
// no further frames until the code makes a bridge call (whose reply it
// needs) or it receives SIGUSR1: a supervisor that sends Stats or Ping
// while code runs signals the worker after sending it. The Output of an
// Execute is sent in batches, each before any other frame of the Execute
// and at most a millisecond after it was printed.
//
// ProtocolVersion is carried in Hello; the envelope and Hello are frozen
// so that mismatched builds can always detect each other.
//
// # Values
//
// Python values (variables, bridge arguments) travel as msgpack data
// decoded to a fixed set of Go types; see EncodeValue and DecodeValue.
// Ordinary types map to native msgpack: None is nil, bool, int (int64, or
// uint64 above math.MaxInt64), float, str, bytes (bin), list and tuple
// (array), and dicts whose keys are all strings (map, decoded as
// map[string]any). Four cases need more:
//
//   - Integers outside [math.MinInt64, math.MaxUint64] use extension type
//     ExtBigInt (1) whose payload is a sign byte (0 or 1) and the
//     big-endian magnitude; they decode as *big.Int. Integers that fit
//     int64 always decode as int64, the others as *big.Int.
//   - Dicts with any non-string key are a native msgpack map with those
//     keys, decoded as Dict (ordered key/value pairs) because such keys,
//     tuples in particular, cannot be Go map keys.
//   - Sets and frozensets use extension type ExtSet (2) whose payload is
//     a msgpack array of the elements; they decode as Set.
//   - A Tuple, a value the caller wants to reach Python as a tuple (a
//     list cannot be a dict key), uses extension type ExtTuple (4), whose
//     payload is a msgpack array of the elements; it decodes as Tuple.
//     Tuples Python sends travel as arrays.
//
// Values nest at most MaxDepth levels.
//
// # Interrupt page
//
// To interrupt running Python without a round trip through the worker's
// message loop, the supervisor creates a Page (NewPage: a one-page
// memfd_create file, mapped shared) and passes Page.File to the worker as
// an inherited file descriptor. The worker maps the same file with
// OpenPage. The page holds one int32 at offset 0, in native byte order,
// accessed only atomically:
//
//   - 0 means no request is pending;
//   - the supervisor interrupts by storing SignalInterrupt (2, SIGINT);
//   - the worker polls the word while Python runs and, on seeing a
//     signal, takes it with Swap(0) and raises KeyboardInterrupt.
//
// Pages are implemented on Linux only; elsewhere NewPage and OpenPage fail
// with an error wrapping errors.ErrUnsupported.
package ipc
