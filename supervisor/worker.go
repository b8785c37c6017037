package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rlm-sandbox/rlm-sandbox/internal/convert"
	"github.com/rlm-sandbox/rlm-sandbox/internal/pipe"
	"github.com/rlm-sandbox/rlm-sandbox/internal/spin"
	"github.com/rlm-sandbox/rlm-sandbox/internal/worker"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
)

// workerSandbox runs the interpreter in an rlm-worker process. Interrupts
// go through a shared memory page; killing the process returns every byte
// of the interpreter's memory to the OS.
type workerSandbox struct {
	cfg    Config
	info   Info
	cmd    *exec.Cmd
	page   *ipc.Page
	stdin  io.WriteCloser
	stdout *pipe.Reader // the worker's frames, read by the callers (see await)
	rd     *ipc.Reader
	w      *ipc.Writer
	// poll waits a while for a frame the worker is about to send, as long
	// as replyEst (a request's first frame) or callEst (a bridge call
	// after the last one's answer) says (see replySpin).
	poll              spin.Poller
	replyEst, callEst spin.Estimate
	sem               chan struct{}
	inited            atomic.Bool
	// bridges answers the running code's bridge calls; answerers runs
	// the calls of a batch.
	bridges   *bridges
	answerers *answerers
	running   atomic.Pointer[run]  // the Execute in progress, if any
	output    atomic.Pointer[pump] // its output callbacks' pump, until they are done
	// turn is signalled when the caller reading the frames stops.
	turn chan struct{}
	// stageFile carries large values to the worker (see stage), or is nil.
	stageFile *os.File
	// cancels counts the calls of Cancel: an Initialize or SetVariable
	// looks at it while it converts and stages a value, before the run
	// Cancel reaches has started (canceledSince).
	cancels cancelCount

	mu      sync.Mutex
	reading bool // a caller is reading the frames
	nextID  uint64
	pending map[uint64]chan ipc.Message
	outputs map[uint64]*execStreams
	// asked holds the bridge calls of the running code not answered yet.
	asked map[uint64]struct{}
	// inCallback: the reading is held by a bridge reader running a
	// callback; readerGen counts the bridge readers' holds (see
	// bridgeReader).
	inCallback bool
	readerGen  uint64
	dead       error
	closed     bool

	exited  chan struct{} // closed once the process has been reaped
	logTail *logTail      // the last lines of its stderr
	exit    error         // how it ended; read after exited is closed
	// oomKills reads the count of out-of-memory kills in the worker's
	// memory cgroup (see oomCounter; nil: none), which was oomBase before
	// it started; killing says whether the supervisor killed it: a SIGKILL
	// from elsewhere while the count rose is reported as ErrOutOfMemory.
	oomKills func() (int64, bool)
	oomBase  int64
	killing  atomic.Bool
	hello    helloWait // the deadline of the first frame
}

// findWorker locates the rlm-worker binary: cfg.WorkerPath, else
// $RLM_WORKER, else next to the running executable, else $PATH. named is
// whether the caller named it (WorkerPath or $RLM_WORKER): then it is the
// only one tried.
func findWorker(path string) (found string, named bool, err error) {
	if path == "" {
		path = os.Getenv("RLM_WORKER")
	}
	if path != "" {
		found, err = exec.LookPath(path)
		return found, true, err
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "rlm-worker")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, false, nil
		}
	}
	found, err = exec.LookPath("rlm-worker")
	return found, false, err
}

// workerCommand is how a worker process is started.
type workerCommand struct {
	path  string // the executable
	name  string // the executable's name, for logs and errors
	self  bool   // the running program, re-executed (see selfexec.go)
	about string // for Info().Reason
}

// findWorkerCommand returns the rlm-worker binary findWorker finds or,
// when there is none, none was named and cfg.NoSelfExec is false, the
// running program itself.
func findWorkerCommand(cfg Config) (workerCommand, error) {
	path, named, err := findWorker(cfg.WorkerPath)
	if err == nil {
		return workerCommand{path: path, name: path, about: path}, nil
	}
	if named || cfg.NoSelfExec {
		// A named worker is the one wanted: not the program in its place.
		return workerCommand{}, fmt.Errorf("no rlm-worker binary: %v", err)
	}
	exe, serr := selfWorker()
	if serr != nil {
		return workerCommand{}, fmt.Errorf("no rlm-worker binary (%v), and the program cannot be its own worker: %v", err, serr)
	}
	name, nerr := os.Executable()
	if nerr != nil {
		name = exe
	}
	return workerCommand{path: exe, name: name, self: true,
		about: "self re-exec: no rlm-worker binary, so the program " + name + " runs as its own worker"}, nil
}

func newWorker(ctx context.Context, cfg Config) (*workerSandbox, error) {
	wc, err := findWorkerCommand(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	if cfg.Hardening != HardeningOn {
		return startWorker(ctx, cfg, wc, false, nil)
	}
	if why := namespacesRefused(); why != "" {
		return startWorker(ctx, cfg, wc, false, []string{why})
	}
	s, err := startWorker(ctx, cfg, wc, true, nil)
	switch {
	case errors.Is(err, errNamespaces):
		why := namespacesRefused()
		cfg.Logger.Warn("worker: starting without new namespaces", "why", why)
		return startWorker(ctx, cfg, wc, false, []string{why})
	case errors.Is(err, runtime.ErrDistribution) && mayDownload(cfg):
		// The worker may have had to download Pyodide, which a network
		// namespace forbids: it gets the network, this once. Only a
		// retry that works says so: when it fails too, the namespaces
		// were not the cause, and its error is the one to report (once).
		why := "userns, netns: Pyodide could not be loaded without the network (" + err.Error() + ")"
		s, err := startWorker(ctx, cfg, wc, false, []string{why})
		if err == nil {
			cfg.Logger.Warn("worker: started without new namespaces", "why", why)
		}
		return s, err
	}
	return s, err
}

// mayDownload reports whether the worker may fetch Pyodide over the
// network: no PyodideDir, and an http(s) index URL (the defaults have one).
func mayDownload(cfg Config) bool {
	if cfg.PyodideDir != "" {
		return false
	}
	urls := cfg.IndexURL
	if len(urls) == 0 {
		if env := os.Getenv(runtime.IndexURLEnv); env != "" {
			urls = strings.Split(env, ",")
		} else {
			urls = runtime.DefaultIndexURL()
		}
	}
	for _, u := range urls {
		if u = strings.TrimSpace(u); strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			return true
		}
	}
	return false
}

// errNamespaces is the kernel refusing to start a worker in new
// namespaces.
var errNamespaces = errors.New("supervisor: new namespaces refused")

// brokenWorker is the ErrWorkerUnavailable of a worker that was found and
// started, then failed to come up (it timed out, exited, or wrote what is
// not the protocol): WorkerAuto reports it rather than run the interpreter
// in-process, without the worker's walls, in its place.
type brokenWorker struct{ error }

func (b brokenWorker) Unwrap() error { return b.error }

// startWorker starts the worker wc, in new namespaces if ns, and
// waits for its hello. refused lists the layers already known to be
// refused.
func startWorker(ctx context.Context, cfg Config, wc workerCommand, ns bool, refused []string) (*workerSandbox, error) {
	page, err := ipc.NewPage()
	if err != nil {
		return nil, fmt.Errorf("%w: interrupt page: %v", ErrWorkerUnavailable, err)
	}
	args := append(cfg.workerArgs(), "--interrupt-fd", "3")
	stageFile := newStageFile()
	if stageFile != nil {
		args = append(args, "--stage-fd", "4")
	}
	cmd := exec.Command(wc.path, args...)
	cmd.ExtraFiles = []*os.File{page.File()}
	if stageFile != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, stageFile)
	}
	cmd.Env = os.Environ()
	if wc.self {
		// Read by the package's initialiser in the child (serveIfChild);
		// argv[0] keeps process listings readable.
		cmd.Args[0] = "rlm-worker"
		cmd.Env = append(cmd.Env, workerEnv+"=1")
	}
	layers := setProcAttr(cmd, cfg.Hardening, ns)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	if f, ok := stdin.(*os.File); ok {
		enlargePipe(f) // large contexts cross in 1 MiB Stage frames
	}
	// Not StdoutPipe: Wait would close the read end when the process
	// exits, possibly before its last frames are read.
	// Read outside Go's poller: see package pipe.
	stdout, stdoutW, err := pipe.New()
	if err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	enlargePipe(stdout)
	cmd.Stdout = stdoutW
	// Not StderrPipe either: the reaper below reads it to its end, but
	// waits for the process without waiting for that end, which a
	// process the worker started may hold off (a wrapper script's).
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		page.Close()
		stdout.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	cmd.Stderr = stderrW
	oomKills := selfOOMCounter() // the worker starts in this process's cgroup
	var oomBase int64
	if oomKills != nil {
		oomBase, _ = oomKills()
	}
	err = cmd.Start()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		if stageFile != nil {
			stageFile.Close()
		}
		page.Close()
		stdout.Close()
		stderr.Close()
		if ns && refuseNamespaces(err) {
			return nil, fmt.Errorf("%w: %v", errNamespaces, err)
		}
		return nil, fmt.Errorf("%w: start %s: %v", ErrWorkerUnavailable, wc.name, err)
	}
	s := &workerSandbox{
		cfg: cfg, cmd: cmd, page: page, stageFile: stageFile, stdin: stdin, stdout: stdout, rd: ipc.NewReader(stdout), w: ipc.NewWriter(stdin), poll: spin.New(stdout, replySpin),
		sem:      make(chan struct{}, 1),
		bridges:  newBridges(cfg),
		turn:     make(chan struct{}, 1),
		pending:  map[uint64]chan ipc.Message{},
		outputs:  map[uint64]*execStreams{},
		asked:    map[uint64]struct{}{},
		exited:   make(chan struct{}),
		logTail:  &logTail{},
		oomKills: oomKills,
		oomBase:  oomBase,
	}
	s.answerers = newAnswerers(s.exited, s.cfg.MaxBridgeConcurrency)
	log := cfg.Logger.With("worker_pid", cmd.Process.Pid)
	go func() {
		pumped := make(chan struct{})
		go func() {
			s.pumpLogs(stderr) // until the process is gone or closed its stderr
			close(pumped)
		}()
		werr := cmd.Wait()
		// The worker's last lines are logged before it is reported gone,
		// unless a process it started keeps its stderr open.
		select {
		case <-pumped:
		case <-time.After(stderrGrace):
		}
		stderr.Close()
		<-pumped
		s.exit = s.explainExit(werr)
		if stageFile != nil {
			stageFile.Close()
		}
		close(s.exited)
		s.failPending()
		log.Info("worker exited", "status", fmt.Sprint(s.exit))
	}()

	hello, err := s.readHello(ctx)
	if err != nil {
		if errors.Is(err, ErrWorkerUnavailable) {
			err = brokenWorker{fmt.Errorf("%w (%s)", err, wc.about)}
		}
		return nil, err
	}
	if hello.Kind == ipc.KindError {
		e, _ := hello.Body.(ipc.Error)
		s.kill()
		if e.Code == worker.CodeDistribution {
			msg := strings.TrimPrefix(e.Message, runtime.ErrDistribution.Error()+": ")
			return nil, fmt.Errorf("%w (in rlm-worker): %s", runtime.ErrDistribution, msg)
		}
		return nil, fmt.Errorf("supervisor: rlm-worker could not start its interpreter: %s", e.Message)
	}
	h, _ := hello.Body.(ipc.Hello)
	if err := ipc.CheckHello(h); err != nil {
		s.kill()
		return nil, brokenWorker{fmt.Errorf("%w: %w (%s)", ErrWorkerUnavailable, err, wc.about)}
	}
	if h.Hardened != "" {
		layers = append(layers, strings.Split(h.Hardened, ",")...)
	}
	if h.Refused != "" {
		refused = append(refused, strings.Split(h.Refused, "\n")...)
	}
	s.info = Info{Worker: true, Reason: "worker started (" + wc.about + ")", PID: h.PID,
		PythonVersion: h.PythonVersion, PyodideVersion: h.PyodideVersion,
		Hardening: layers, HardeningRefused: refused}
	log.Info("sandbox started", "mode", "worker", "path", wc.name, "self_exec", wc.self, "hardening", layers, "refused", refused)
	return s, nil
}

func (s *workerSandbox) Info() Info { return s.info }

// pumpLogs forwards the worker's stderr, one record per line, to the logger.
func (s *workerSandbox) pumpLogs(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		s.logTail.add(line)
		if strings.HasPrefix(line, compileNotice) {
			s.compiling()
		}
		if isNotice(line) {
			s.cfg.Logger.Warn(line, "pid", s.cmd.Process.Pid)
		} else {
			s.cfg.Logger.Info("worker", "pid", s.cmd.Process.Pid, "line", line)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// logTail keeps the last lines a worker wrote on its stderr, for the
// error of a worker that exits while it starts (a wrong binary's usage
// message): Config.Logger, which has them all, discards by default.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (t *logTail) add(line string) {
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 3 {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

// String is the lines kept, quoted, or "" for none.
func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return strconv.Quote(strings.Join(t.lines, "\n"))
}

func (s *workerSandbox) failPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.pending {
		close(ch)
		delete(s.pending, id)
	}
}

// explainExit is err, the worker's exit, marked as ErrOutOfMemory when
// the worker took a SIGKILL the supervisor did not send while the kernel's
// out-of-memory killer killed in its cgroup (the kernel does not say
// whom: another kill there since the worker started would be counted
// too, hence "most likely" in the message).
func (s *workerSandbox) explainExit(err error) error {
	var ee *exec.ExitError
	if s.oomKills == nil || s.killing.Load() || !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return err
	}
	if n, ok := s.oomKills(); !ok || n <= s.oomBase {
		return err
	}
	return &joinedError{msg: err.Error() + ", most likely by the kernel's out-of-memory killer: the machine or its container ran out of memory",
		errs: []error{ErrOutOfMemory, err}}
}

// stderrGrace is how long the reaper waits, once the worker exited, for
// the end of its stderr, which processes it started may keep open.
const stderrGrace = 200 * time.Millisecond

// kill ends the process (idempotent) and releases the page and the
// pipe once it is reaped.
func (s *workerSandbox) kill() {
	s.killing.Store(true)
	_ = s.cmd.Process.Kill()
	killGroup(s.cmd) // and what it started, in its process group if it has one
	_ = s.stdin.Close()
	<-s.exited
	s.page.Close()
	s.stdout.Close()
}

func (s *workerSandbox) markDead(err error) {
	s.mu.Lock()
	if s.dead == nil {
		s.dead = err
	}
	s.mu.Unlock()
}

// deadErr is the error of calls on a sandbox whose worker is gone.
func (s *workerSandbox) deadErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrDestroyed
	}
	if s.dead != nil {
		return s.dead
	}
	select {
	case <-s.exited:
		s.dead = workerDead(s.exit)
		return s.dead
	default:
	}
	return nil
}

func (s *workerSandbox) acquire(ctx context.Context) error {
	if err := s.deadErr(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // select would pick a free slot half the time
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
	}
	if err := s.deadErr(); err != nil {
		<-s.sem
		return err
	}
	return nil
}

func (s *workerSandbox) release() { <-s.sem }

// send writes a request and returns the channel its reply arrives on
// (closed if the worker dies first).
func (s *workerSandbox) send(kind ipc.Kind, body any, streams *execStreams) (uint64, chan ipc.Message, error) {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	ch := make(chan ipc.Message, 1)
	s.pending[id] = ch
	if streams != nil {
		s.outputs[id] = streams
	}
	s.mu.Unlock()
	if err := s.w.WriteMessage(kind, id, body); err != nil {
		s.forget(id)
		if e := s.waitDead(); e != nil {
			return 0, nil, e
		}
		return 0, nil, fmt.Errorf("supervisor: send %v: %w", kind, err)
	}
	return id, ch, nil
}

func (s *workerSandbox) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	delete(s.outputs, id)
	s.mu.Unlock()
}

// waitDead gives the reaper a moment to notice a dying worker, so a write
// that failed because the worker died reports that.
func (s *workerSandbox) waitDead() error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
	}
	return s.deadErr()
}

// call sends a request and waits for its reply.
func (s *workerSandbox) call(ctx context.Context, kind ipc.Kind, body any) (ipc.Message, error) {
	id, ch, err := s.send(kind, body, nil)
	if err != nil {
		return ipc.Message{}, err
	}
	if kind == ipc.KindStats && s.running.Load() != nil && worker.AttentionSignal != nil {
		// The worker reads while code runs only when asked to.
		_ = s.cmd.Process.Signal(worker.AttentionSignal)
	}
	m, ok, err := s.await(ctx, id, ch, nil)
	if err != nil {
		s.forget(id)
		return ipc.Message{}, fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	if !ok {
		return ipc.Message{}, s.deadErr()
	}
	return m, replyErr(m)
}

func replyErr(m ipc.Message) error {
	if m.Kind != ipc.KindError {
		return nil
	}
	e, _ := m.Body.(ipc.Error)
	if e.Code == "dead" {
		return fmt.Errorf("%w: %s", ErrDead, e.Message)
	}
	return fmt.Errorf("supervisor: worker: %s", e.Error())
}

func (s *workerSandbox) Initialize(ctx context.Context, value any) error {
	if err := ctx.Err(); err != nil { // before converting a large value
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	v, err := s.cancels.value(value)
	if err != nil {
		return fmt.Errorf("supervisor: initialize: context: %w", err)
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	wire, staged, err := s.stage(ctx, v)
	if err != nil {
		return opError("initialize", err)
	}
	defer s.unstage()
	if _, err := s.callRun(ctx, "initialize", ipc.KindInitialize, ipc.Initialize{Context: wire, Staged: staged}); err != nil {
		return err
	}
	s.bridges.setContext(value)
	s.inited.Store(true)
	return nil
}

// Values are staged (sent ahead in Stage frames of stageChunk bytes) from
// stageMin bytes on.
const (
	stageMin   = 1 << 20
	stageChunk = 1 << 20
)

// stageWrite is how much of a value is written to the staging file
// between two looks at the context.
const stageWrite = 16 << 20

// stage prepares v for an Initialize or SetVariable: it returns the value
// to put in the message, or sends v ahead in Stage frames and returns the
// staging format. Large strings are sent from the caller's memory, chunk
// by chunk, so the supervisor never holds a second copy of them. When ctx
// ends, or Cancel is called, before a large value has gone, so does the
// request (ErrCanceled).
func (s *workerSandbox) stage(ctx context.Context, v any) (wire any, staged string, err error) {
	// Until a large value has gone, Cancel has no run to reach: the
	// conversion's steps and the copy look at the count of its calls.
	g := s.cancels.Load()
	canceled := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrCanceled, err)
		}
		return s.cancels.since(g)
	}
	var data string
	if str, ok := v.(string); ok && len(str) >= stageMin {
		data, staged = str, ipc.StagedText
	} else {
		wire = convert.ToIPC(v)
		b, err := ipc.EncodeValue(wire)
		if err == nil && len(b) < stageMin {
			return wire, "", nil
		}
		if err != nil && !errors.Is(err, ipc.ErrFrameTooLarge) {
			return nil, "", err
		}
		if err := canceled(); err != nil {
			return nil, "", err
		}
		if b, err = ipc.EncodeStagedValue(wire); err != nil {
			return nil, "", err
		}
		data, staged, wire = string(b), ipc.StagedValue, nil
	}
	if err := canceled(); err != nil {
		return nil, "", err
	}
	size := int64(len(data))
	if s.stageFile != nil {
		// Nothing tells the worker of the file's contents until the
		// Stage frame: a write the context ended is left unread.
		err := s.stageInFile(data, canceled)
		if errors.Is(err, ErrCanceled) {
			return nil, "", err
		}
		if err == nil {
			err = s.w.WriteMessage(ipc.KindStage, 0, ipc.Stage{Size: size, File: true})
		}
		if err != nil {
			if e := s.waitDead(); e != nil {
				return nil, "", e
			}
			return nil, "", fmt.Errorf("send the value: %w", err)
		}
		return nil, staged, nil
	}
	for len(data) > 0 {
		n := min(len(data), stageChunk)
		if err := s.w.WriteMessage(ipc.KindStage, 0, ipc.Stage{Data: data[:n], Size: size}); err != nil {
			if e := s.waitDead(); e != nil {
				return nil, "", e
			}
			return nil, "", fmt.Errorf("send the value: %w", err)
		}
		data = data[n:]
	}
	return nil, staged, nil
}

// A large value crosses to the worker in a memory file (memfd) both
// processes hold, instead of through the pipe: written once by the
// supervisor, mapped by the worker, it is copied twice (into the file, into
// the interpreter) where Stage frames copied it five times (into a frame,
// into and out of the pipe, into the staging buffer, into the
// interpreter) and woke the worker for every 1 MiB frame.

// stageInFile writes data at the start of the staging file, stageWrite
// bytes at a time, and stops with canceled's error when it has one.
func (s *workerSandbox) stageInFile(data string, canceled func() error) error {
	if err := s.stageFile.Truncate(int64(len(data))); err != nil {
		return err
	}
	b := unsafe.Slice(unsafe.StringData(data), len(data))
	for off := 0; off < len(b); off += stageWrite {
		if err := canceled(); err != nil {
			return err
		}
		if _, err := s.stageFile.WriteAt(b[off:min(off+stageWrite, len(b))], int64(off)); err != nil {
			return err
		}
	}
	return canceled()
}

// unstage empties the staging file once the worker has used it.
func (s *workerSandbox) unstage() {
	if s.stageFile != nil {
		_ = s.stageFile.Truncate(0)
	}
}

func (s *workerSandbox) GetVariable(ctx context.Context, name string) (any, bool, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, false, err
	}
	defer s.release()
	if !s.inited.Load() {
		return nil, false, ErrNotInitialized
	}
	m, err := s.callRun(ctx, "get variable "+name, ipc.KindGetVariable, ipc.GetVariable{Name: name})
	if err != nil {
		return nil, false, err
	}
	r, ok := m.Body.(ipc.GetVariableReply)
	if !ok {
		return nil, false, fmt.Errorf("%w: %v in reply to get variable", ErrProtocol, m.Kind)
	}
	return convert.FromIPC(r.Value), r.Found, nil
}

func (s *workerSandbox) SetVariable(ctx context.Context, name string, value any) error {
	if err := ctx.Err(); err != nil { // before converting a large value
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	v, err := s.cancels.value(value)
	if err != nil {
		return fmt.Errorf("supervisor: set variable %s: %w", name, err)
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if !s.inited.Load() {
		return ErrNotInitialized
	}
	wire, staged, err := s.stage(ctx, v)
	if err != nil {
		return opError("set variable "+name, err)
	}
	defer s.unstage()
	if name == "context" {
		// Setting the context is what Initialize does.
		_, err = s.callRun(ctx, "set variable context", ipc.KindInitialize, ipc.Initialize{Context: wire, Staged: staged})
		if err == nil {
			s.bridges.setContext(value)
		}
		return err
	}
	_, err = s.callRun(ctx, "set variable "+name, ipc.KindSetVariable, ipc.SetVariable{Name: name, Value: wire, Staged: staged})
	return err
}

// callRun is call for a request other than Execute that may run the
// sandbox's own Python code (converting a value calls its __repr__ or
// __iter__, replacing one its __del__): it runs under the limits of an
// Execute but for the time (valueRunConfig), so the caller's ctx, Cancel
// and the time limit interrupt it, and a worker that ignores the
// interrupt is killed after GracePeriod.
func (s *workerSandbox) callRun(ctx context.Context, what string, kind ipc.Kind, body any) (ipc.Message, error) {
	r := newRun(ctx, valueRunConfig(s.cfg), s.runHooks(), nil)
	o := s.runRequest(r, kind, body, nil)
	switch {
	case o.err != nil:
		return ipc.Message{}, o.err
	case o.killed:
		return ipc.Message{}, fmt.Errorf("supervisor: %s: %w (%s, and the worker was killed; the sandbox is dead: %w)", what, o.why, r.killReason(), s.deadErr())
	case !o.got && o.why != nil:
		return ipc.Message{}, fmt.Errorf("supervisor: %s: %w: %w", what, o.why, s.deadErr())
	case !o.got:
		return ipc.Message{}, s.deadErr()
	}
	if err := replyErr(o.m); err != nil {
		if errors.Is(err, ErrDead) {
			s.markDead(err)
		}
		if o.why != nil { // interrupted (the code may have turned the interrupt into another error)
			return ipc.Message{}, fmt.Errorf("supervisor: %s: %w", what, o.why)
		}
		switch e, _ := o.m.Body.(ipc.Error); e.Code {
		case ipc.CodeInternal:
			// The guest could not serve it (a MemoryError, say): named
			// as direct mode names it, not as a failure of the worker.
			return ipc.Message{}, fmt.Errorf("supervisor: %s: %s", what, e.Message)
		case ipc.CodeTooLarge:
			// A value over 64 MiB read back (GetVariable).
			return ipc.Message{}, fmt.Errorf("supervisor: %s: %w: %s", what, ErrTooLarge, e.Message)
		}
		return ipc.Message{}, err
	}
	return o.m, nil
}

// runOutcome is how a request run under a run ended (see runRequest).
type runOutcome struct {
	m      ipc.Message // the reply, when got
	got    bool
	err    error // the request could not be sent
	why    error // why the run was stopped, or nil
	killed bool  // the worker was killed for ignoring the interrupt
}

// runRequest sends a request that runs the sandbox's code under r (which
// Cancel then reaches) and waits for its reply, or for the worker's end:
// no cancellation here, the run interrupts the code and the worker
// replies, or is killed and the frames end.
func (s *workerSandbox) runRequest(r *run, kind ipc.Kind, body any, streams *execStreams) (o runOutcome) {
	s.running.Store(r)
	if r.out != nil {
		s.output.Store(r.out)
	}
	id, ch, err := s.send(kind, body, streams)
	o.err = err
	if err == nil {
		r.id.Store(id)
		o.m, o.got, _ = s.await(nil, id, ch, streams)
		s.forget(id)
	}
	s.running.Store(nil)
	s.mu.Lock()
	clear(s.asked) // late answers of abandoned calls are not sent
	s.mu.Unlock()
	o.why, o.killed = r.end()
	if o.killed {
		// The kill may still be on its way (the reply came as the grace
		// period ended): the sandbox is dead all the same.
		s.markStubborn()
	}
	if o.why != nil && o.got {
		// A stop that came after the code returned left the interrupt
		// pending: it must not hit the next request.
		s.page.Store(0)
	}
	return o
}

// answerBridge runs a bridge call of the running code and sends the answer.
func (s *workerSandbox) answerBridge(r *run, id uint64, c ipc.BridgeCall) {
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		args[i] = convert.FromIPC(a)
	}
	var reply ipc.BridgeReply
	res, err := s.bridges.call(r, c.Method, args)
	if err != nil {
		reply.Error = err.Error()
	} else if v, err := pythonValue(res); err != nil {
		reply.Error = fmt.Sprintf("the host's answer to %s cannot be passed to Python: %v", c.Method, err)
	} else {
		reply.Result = convert.ToIPC(v)
	}
	if !s.answered(id) {
		return // interrupted, and answered so
	}
	if err := s.w.WriteMessage(ipc.KindBridgeReply, id, reply); err != nil {
		if errors.Is(err, ipc.ErrFrameTooLarge) {
			reply = ipc.BridgeReply{Error: fmt.Sprintf("the host's answer to %s is too large (over %d MiB)", c.Method, ipc.MaxFrameSize>>20)}
			err = s.w.WriteMessage(ipc.KindBridgeReply, id, reply)
		}
		if err != nil {
			s.cfg.Logger.Warn("could not send a bridge answer", "method", c.Method, "err", err)
		}
	}
}

// maxCode is the largest code a worker takes: one Execute frame, less room
// for its envelope.
const maxCode = ipc.MaxFrameSize - 1024

func (s *workerSandbox) Execute(ctx context.Context, code string) (*CodeExecution, error) {
	return s.execute(ctx, code, false)
}

func (s *workerSandbox) ExecuteInteractive(ctx context.Context, code string) (*CodeExecution, error) {
	return s.execute(ctx, code, true)
}

func (s *workerSandbox) execute(ctx context.Context, code string, interactive bool) (*CodeExecution, error) {
	if len(code) > maxCode { // refused at once, not after the code running now
		return nil, fmt.Errorf("%w: code of %d bytes (a worker takes at most %d, in one message); pass large data with SetVariable or Initialize",
			ErrTooLarge, len(code), maxCode)
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if !s.inited.Load() {
		return nil, ErrNotInitialized
	}
	streams, out := newStreams(s.cfg)
	defer s.output.Store(nil) // published by runRequest, after the run: see Cancel
	r := newRun(ctx, s.cfg, s.runHooks(), out)
	o := s.runRequest(r, ipc.KindExecute, ipc.Execute{Code: code, Interactive: interactive}, streams)
	m, got, why, killed := o.m, o.got, o.why, o.killed
	if o.err != nil {
		out.abandon(o.err)
		return nil, o.err
	}
	if killed {
		ce, _ := s.execution(ctx, code, streams, r, nil)
		return ce, fmt.Errorf("%w (%s, and the worker was killed; the sandbox is dead: %w)", why, r.killReason(), s.deadErr())
	}
	if !got {
		ce, _ := s.execution(ctx, code, streams, r, nil)
		switch dead := s.deadErr(); {
		case why == nil || errors.Is(dead, why): // Destroy's: "sandbox destroyed", once
			return ce, dead
		case dead == nil:
			return ce, why
		default:
			return ce, fmt.Errorf("%w: %w", why, dead)
		}
	}
	if err := replyErr(m); err != nil {
		if errors.Is(err, ErrDead) {
			s.markDead(err)
		}
		if why != nil { // the interrupt is why, whatever came of it
			err = fmt.Errorf("%w: %w", why, err)
		}
		ce, _ := s.execution(ctx, code, streams, r, nil)
		return ce, err
	}
	res, ok := m.Body.(ipc.Result)
	if !ok {
		out.abandon(ErrProtocol)
		return nil, fmt.Errorf("%w: %v in reply to execute", ErrProtocol, m.Kind)
	}
	ce, outErr := s.execution(ctx, code, streams, r, &res)
	if why != nil && !r.stoppedAfterReturn() {
		return stoppedExecution(ce, why), why
	}
	return ce, outErr
}

// interrupt raises KeyboardInterrupt in the running code. A bridge call the
// code waits for is answered at once (the worker waits for the answer,
// not for the signal; see runtime.Config.BridgeInline): its callback, told
// by its context, may take its time.
func (s *workerSandbox) interrupt() {
	s.page.Store(ipc.SignalInterrupt)
	s.mu.Lock()
	ids := make([]uint64, 0, len(s.asked))
	for id := range s.asked {
		ids = append(ids, id)
	}
	clear(s.asked)
	gen, held := s.readerGen, s.inCallback
	s.mu.Unlock()
	if len(ids) > 0 {
		go s.answerInterrupted(ids...) // not under the run's lock
	}
	if held {
		s.takeReadingBack(gen)
	}
}

func (s *workerSandbox) answerInterrupted(ids ...uint64) {
	for _, id := range ids {
		_ = s.w.WriteMessage(ipc.KindBridgeReply, id, ipc.BridgeReply{Error: "interrupted"})
	}
}

// answered reports whether the bridge call id still waits for its answer,
// which the caller then sends.
func (s *workerSandbox) answered(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.asked[id]
	delete(s.asked, id)
	return ok
}

// killStubborn ends a worker whose code ignored the interrupt.
func (s *workerSandbox) killStubborn() {
	s.cfg.Logger.Warn("code ignored the interrupt; killing the worker", "pid", s.info.PID, "grace", s.cfg.GracePeriod)
	s.markStubborn()
	s.kill()
}

// runHooks are how a run acts on the worker: a code that has not
// returned GracePeriod after the interrupt is killed, in Python or in C.
func (s *workerSandbox) runHooks() runHooks {
	return runHooks{interrupt: s.interrupt, kill: s.killStubborn, untaken: func() bool { return s.page.Load() != 0 },
		returned: s.page.Returned, frozen: func() bool { return processStopped(s.cmd.Process.Pid) }}
}

// markStubborn marks the sandbox dead for code that did not return after
// the interrupt.
func (s *workerSandbox) markStubborn() {
	s.markDead(workerDead(fmt.Errorf("killed %v after the interrupt", s.cfg.GracePeriod)))
}

// execution is the CodeExecution of the run r, once its output callbacks
// are done (awaitOutput, whose error it returns).
func (s *workerSandbox) execution(ctx context.Context, code string, st *execStreams, r *run, res *ipc.Result) (*CodeExecution, error) {
	python := r.clock.stop()
	ce := &CodeExecution{Code: code, Stdout: st.stdout.String(), Stderr: st.stderr.String(), PythonDuration: python}
	outErr := awaitOutput(ctx, r)
	ce.Duration = time.Since(r.start)
	ce.Truncated = st.stdout.truncated() || st.stderr.truncated()
	ce.BridgeCalls = int(r.calls.Load())
	if res != nil {
		var exit *Exit
		if res.SystemExit {
			exit = &Exit{Status: res.ExitStatus, Stderr: res.ExitStderr}
		}
		ce.setError(res.Error, res.ErrorType, res.Traceback, exit, s.cfg.MaxOutputLength)
	}
	return ce, outErr
}

func (s *workerSandbox) IsComplete(ctx context.Context, source string) (bool, error) {
	if err := s.acquire(ctx); err != nil {
		return false, err
	}
	defer s.release()
	// Under a run, as a value's request: a worker that does not answer
	// (stopped, or compiling something huge) is interrupted, then killed,
	// instead of holding the sandbox for every later call.
	m, err := s.callRun(ctx, "is complete", ipc.KindComplete, ipc.Complete{Source: source})
	if err != nil {
		return false, err
	}
	r, ok := m.Body.(ipc.CompleteReply)
	if !ok {
		return false, fmt.Errorf("%w: %v in reply to complete", ErrProtocol, m.Kind)
	}
	return r.Complete, nil
}

// Stats asks the worker, which answers at once even while code runs.
func (s *workerSandbox) Stats(ctx context.Context) (Stats, error) {
	if err := s.deadErr(); err != nil {
		return Stats{}, err
	}
	if err := ctx.Err(); err != nil { // the reply may be there before the wait looks at ctx
		return Stats{}, fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	m, err := s.call(ctx, ipc.KindStats, ipc.Stats{})
	if err != nil {
		return Stats{}, err
	}
	r, ok := m.Body.(ipc.StatsReply)
	if !ok {
		return Stats{}, fmt.Errorf("%w: %v in reply to stats", ErrProtocol, m.Kind)
	}
	return Stats{Worker: true, PID: s.info.PID, RSSBytes: r.RSSBytes, LinearMemoryBytes: r.LinearMemoryBytes,
		Executions: r.Executions, Uptime: time.Duration(r.UptimeNanos),
		Hardening: s.info.Hardening, HardeningRefused: s.info.HardeningRefused}, nil
}

func (s *workerSandbox) Cancel() {
	r := s.running.Load()
	s.cancels.cancel(r)
	cancelExecution(r, s.output.Load())
}

func (s *workerSandbox) Destroy() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.output.Load().abandon(ErrDestroyed)
	if r := s.running.Load(); r != nil {
		r.destroyed() // its callbacks' context is cancelled before Destroy returns
	}
	s.kill()
	return nil
}

// healthy reports whether the worker can still run code. The goroutine
// that waits for the worker records its exit a moment after the process is
// reaped; a worker whose process is gone already counts as dead too, so
// that a pool does not hand out one killed while it was idle.
func (s *workerSandbox) healthy() bool {
	return s.deadErr() == nil && !processGone(s.cmd.Process.Pid)
}
