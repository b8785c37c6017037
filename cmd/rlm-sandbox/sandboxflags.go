package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/jsonvalue"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/pflag"
)

// sandboxOptions are the flags exec and repl share: the context, the
// limits, the mode and the bridges. config turns them into a
// supervisor.Config; nothing else interprets them.
type sandboxOptions struct {
	contextText string // --context
	contextFile string // --context-file
	contextJSON string // --context-json

	timeout     time.Duration
	wallTimeout time.Duration
	memoryLimit byteSize
	direct      bool
	// requireWorker: an rlm-worker or nothing (--require-worker, or
	// $RLM_SANDBOX_REQUIRE_WORKER=1).
	requireWorker bool

	llmCmd string
	rlmCmd string

	indexURL []string

	flags *pflag.FlagSet // to tell a flag given empty from one not given
}

// requireWorkerEnv, set to 1, turns --require-worker on by default: for a
// machine or CI job where code must never run outside a worker.
const requireWorkerEnv = "RLM_SANDBOX_REQUIRE_WORKER"

// The range of --memory-limit and serve's memory_limit: the runtime's.
const (
	minMemoryLimit = runtime.MinMemoryLimit
	maxMemoryLimit = runtime.MaxMemoryLimit
)

// memoryLimitOK reports whether m is 0 (4 GiB) or in the range the
// runtime takes (runtime.CheckMemoryLimit); the CLI's flag and serve's
// memory_limit take the same values.
func memoryLimitOK(m uint64) bool {
	return runtime.CheckMemoryLimit(m) == nil
}

func (o *sandboxOptions) addFlags(fs *pflag.FlagSet, defaultTimeout time.Duration) {
	o.flags = fs
	fs.StringVar(&o.contextText, "context", "", "`TEXT` that becomes the Python variable context")
	fs.StringVar(&o.contextFile, "context-file", "", "file at `PATH` whose text becomes context (\"-\": standard input)")
	fs.StringVar(&o.contextJSON, "context-json", "", "`JSON` value that becomes context (\"-\": read it from standard input, \"@PATH\": from a file);\nnested at most 200 levels deep, its numbers within a float's range")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "interrupt code that runs Python longer than this (0: never)")
	fs.DurationVar(&o.wallTimeout, "wall-timeout", 0, "interrupt code that takes longer than this, bridge calls included (0: never)")
	fs.Var(&o.memoryLimit, "memory-limit", "cap the interpreter's memory, from 32M to 4G (e.g. 512M, 2G); past it Python raises MemoryError\n(default 0: 4G, all a wasm32 interpreter can address)")
	fs.BoolVar(&o.direct, "direct", false, "run the interpreter in this process instead of an rlm-worker process")
	fs.BoolVar(&o.requireWorker, "require-worker", os.Getenv(requireWorkerEnv) == "1",
		"run the interpreter only in a locked-down rlm-worker process: fail when none can start, instead of running in this process\n(default: $"+requireWorkerEnv+"=1 turns it on)")
	fs.StringVar(&o.llmCmd, "llm-cmd", "", "answer llm_query(prompt) by running shell `COMMAND` with the prompt on stdin; its stdout is the answer")
	addIndexURLFlag(fs, &o.indexURL)
	fs.StringVar(&o.rlmCmd, "rlm-cmd", "", "answer rlm_query(task, ctx) by running shell `COMMAND` with the task on stdin and the context in the file $"+envContextFile)
}

// addIndexURLFlag adds the repeatable --index-url flag.
func addIndexURLFlag(fs *pflag.FlagSet, urls *[]string) {
	fs.StringArrayVar(urls, "index-url", nil, "load Pyodide from `URL` (a directory, file:// or http(s):// URL); repeat for fallbacks, tried in order (default: $"+runtime.IndexURLEnv+", else the cache, then jsDelivr)")
}

// validate checks the flags that can be checked before anything is read.
func (o *sandboxOptions) validate() error {
	for _, f := range []struct{ name, want string }{
		{"context-file", `a path, or "-" for standard input`},
		{"context-json", `a JSON value, "-" for standard input or "@PATH" for a file`},
	} {
		if o.flags.Changed(f.name) && o.flags.Lookup(f.name).Value.String() == "" {
			return usageErrorf("--%s is empty: give %s", f.name, f.want)
		}
	}
	if o.direct && o.requireWorker {
		how := "--require-worker"
		if !o.flags.Changed("require-worker") {
			how = "$" + requireWorkerEnv + "=1"
		}
		return usageErrorf("--direct runs the interpreter in this process, which %s forbids", how)
	}
	if m := uint64(o.memoryLimit); !memoryLimitOK(m) {
		return usageErrorf("--memory-limit must be from 32M to 4G (0: 4G); %d bytes is out of range", m)
	}
	// A negative limit would mean none: refuse it rather than run unbounded.
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"timeout", o.timeout}, {"wall-timeout", o.wallTimeout}} {
		if f.d < 0 {
			return usageErrorf("--%s must be 0 (never) or more, not %v", f.name, f.d)
		}
	}
	return nil
}

// contextFromStdin reports whether the context is read from standard input.
func (o *sandboxOptions) contextFromStdin() bool {
	return o.contextFile == "-" || o.contextJSON == "-"
}

// contextValue reads the context the flags name: "" when none.
func (o *sandboxOptions) contextValue(stdin io.Reader) (any, error) {
	n := 0
	for _, s := range []string{o.contextText, o.contextFile, o.contextJSON} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, usageErrorf("give one of --context, --context-file and --context-json")
	}
	// A text context larger than the interpreter's memory cannot fit.
	limit := int64(o.memoryLimit)
	if limit == 0 {
		limit = maxMemoryLimit
	}
	tooLong := func(what string) error {
		return usageErrorf("%s is larger than the sandbox's memory (%d MiB, --memory-limit): it cannot hold it", what, limit>>20)
	}
	switch {
	case o.contextFile == "-":
		b, err := readExact(stdin, limit)
		if errors.Is(err, errTooLong) {
			return nil, tooLong("--context-file -: standard input")
		}
		if err != nil {
			return nil, fmt.Errorf("read the context from standard input: %w", err)
		}
		return fileText(b), nil
	case o.contextFile != "":
		b, err := readFile(o.contextFile, limit)
		if errors.Is(err, errTooLong) {
			return nil, tooLong("--context-file " + o.contextFile)
		}
		if err != nil {
			return nil, usageErrorf("--context-file: %v", err)
		}
		return fileText(b), nil
	case o.contextJSON != "":
		data := []byte(o.contextJSON)
		switch {
		case o.contextJSON == "-":
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read the context from standard input: %w", err)
			}
			data = b
		case strings.HasPrefix(o.contextJSON, "@"):
			b, err := os.ReadFile(o.contextJSON[1:])
			if err != nil {
				return nil, usageErrorf("--context-json: %v", err)
			}
			data = b
		}
		v, err := parseValue(data)
		var num *strconv.NumError
		var deep *jsonvalue.DepthError
		switch {
		case errors.As(err, &deep):
			return nil, usageErrorf("--context-json: %v", err)
		case errors.As(err, &num) && errors.Is(num.Err, strconv.ErrRange):
			return nil, usageErrorf("--context-json: the number %s is out of range: a Python float holds at most about 1.8e308", num.Num)
		case err != nil:
			return nil, usageErrorf("--context-json: not valid JSON: %v", err)
		}
		return v, nil
	}
	return o.contextText, nil
}

// config is the supervisor.Config the flags describe.
func (o *sandboxOptions) config(logger *slog.Logger) supervisor.Config {
	cfg := supervisor.Config{
		Timeout:     o.timeout,
		WallTimeout: o.wallTimeout,
		MemoryLimit: uint64(o.memoryLimit),
		OnLLMQuery:  llmQueryFunc(o.llmCmd),
		OnRLMQuery:  rlmQueryFunc(o.rlmCmd),
		IndexURL:    o.indexURL,
		Logger:      logger,
		// --rlm-cmd's context file has a dict's members in their order
		KeepDictOrder: true,
	}
	if o.timeout <= 0 {
		cfg.Timeout = -1 // the flag's 0 means never; the library's means the default
	}
	switch {
	case o.direct:
		cfg.UseWorker = supervisor.WorkerNever
	case o.requireWorker:
		cfg.UseWorker = supervisor.WorkerAlways
	}
	return cfg
}

// newLogger is the logger sandboxes report to: warnings (such as falling
// back to in-process mode) on stderr, everything with --verbose.
func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(noticeHandler{slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}), w, verbose})
}

// noticeHandler prints the runtime's notices ("rlm-sandbox: compiling
// Pyodide …", which the supervisor logs as warnings) as they are, a line
// each, and hands every other record to Handler (all of them with
// --verbose, for the worker's pid).
type noticeHandler struct {
	slog.Handler
	w       io.Writer
	verbose bool
}

func (h noticeHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.verbose && r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "rlm-sandbox: ") {
		_, err := fmt.Fprintln(h.w, r.Message)
		return err
	}
	return h.Handler.Handle(ctx, r)
}

func (h noticeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return noticeHandler{h.Handler.WithAttrs(attrs), h.w, h.verbose}
}

func (h noticeHandler) WithGroup(name string) slog.Handler {
	return noticeHandler{h.Handler.WithGroup(name), h.w, h.verbose}
}

// byteSize is a flag holding a number of bytes: 1048576, 512K, 512M, 2G
// (binary units; "KiB", "MB" and the like are read the same way).
type byteSize uint64

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return strconv.FormatUint(uint64(*b), 10)
}

func (b *byteSize) Type() string { return "SIZE" }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseByteSize(s string) (uint64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseUint(strings.TrimSpace(t), 10, 64)
	if err != nil || n > (1<<63)>>shift {
		return 0, fmt.Errorf("%q is not a size (want bytes, or a number with K, M or G)", s)
	}
	return n << shift, nil
}
