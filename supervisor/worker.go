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
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/convert"
	"github.com/rlm-sandbox/rlm-sandbox/ipc"
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
	w      *ipc.Writer
	sem    chan struct{}
	inited atomic.Bool

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan ipc.Message
	outputs map[uint64]*execStreams
	running *run
	dead    error
	closed  bool

	hello  chan ipc.Message
	exited chan struct{} // closed once the process has been reaped
	exit   error         // how it ended; read after exited is closed
}

type execStreams struct{ stdout, stderr *outputCollector }

// findWorker locates the rlm-worker binary: cfg.WorkerPath, else
// $RLM_WORKER, else next to the running executable, else $PATH.
func findWorker(path string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if p := os.Getenv("RLM_WORKER"); p != "" {
		return exec.LookPath(p)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "rlm-worker")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath("rlm-worker")
}

func newWorker(ctx context.Context, cfg Config) (*workerSandbox, error) {
	path, err := findWorker(cfg.WorkerPath)
	if err != nil {
		return nil, fmt.Errorf("%w: no rlm-worker binary: %v", ErrWorkerUnavailable, err)
	}
	page, err := ipc.NewPage()
	if err != nil {
		return nil, fmt.Errorf("%w: interrupt page: %v", ErrWorkerUnavailable, err)
	}
	cmd := exec.Command(path,
		"--pyodide", cfg.PyodideDir,
		"--cache", cfg.CacheDir,
		"--memory-limit", strconv.FormatUint(cfg.MemoryLimit, 10),
		"--interrupt-fd", "3")
	cmd.ExtraFiles = []*os.File{page.File()}
	cmd.Env = os.Environ()
	setProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorkerUnavailable, err)
	}
	if err := cmd.Start(); err != nil {
		page.Close()
		return nil, fmt.Errorf("%w: start %s: %v", ErrWorkerUnavailable, path, err)
	}
	s := &workerSandbox{
		cfg: cfg, cmd: cmd, page: page, stdin: stdin, w: ipc.NewWriter(stdin),
		sem:     make(chan struct{}, 1),
		pending: map[uint64]chan ipc.Message{},
		outputs: map[uint64]*execStreams{},
		hello:   make(chan ipc.Message, 1),
		exited:  make(chan struct{}),
	}
	log := cfg.Logger.With("worker_pid", cmd.Process.Pid)
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); s.pumpLogs(stderr) }()
	go func() { defer pumps.Done(); s.readLoop(stdout) }()
	go func() {
		pumps.Wait() // both pipes at EOF: the process is gone or closed them
		s.exit = cmd.Wait()
		close(s.exited)
		s.failPending()
		log.Info("worker exited", "status", fmt.Sprint(s.exit))
	}()

	start := time.NewTimer(cfg.StartTimeout)
	defer start.Stop()
	var hello ipc.Message
	select {
	case hello = <-s.hello:
	case <-s.exited:
		page.Close()
		return nil, fmt.Errorf("%w: rlm-worker exited during start-up (%v); see the log for its output", ErrWorkerUnavailable, s.exit)
	case <-start.C:
		s.kill()
		return nil, fmt.Errorf("%w: rlm-worker did not start within %v", ErrWorkerUnavailable, cfg.StartTimeout)
	case <-ctx.Done():
		s.kill()
		return nil, fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
	}
	if hello.Kind == ipc.KindError {
		e, _ := hello.Body.(ipc.Error)
		s.kill()
		return nil, fmt.Errorf("supervisor: rlm-worker could not start its interpreter: %s", e.Message)
	}
	h, _ := hello.Body.(ipc.Hello)
	if err := ipc.CheckHello(h); err != nil {
		s.kill()
		return nil, fmt.Errorf("%w: %w", ErrWorkerUnavailable, err)
	}
	s.info = Info{Worker: true, Reason: "worker started (" + path + ")", PID: h.PID,
		PythonVersion: h.PythonVersion, PyodideVersion: h.PyodideVersion}
	log.Info("sandbox started", "mode", "worker", "path", path)
	return s, nil
}

func (s *workerSandbox) Info() Info { return s.info }

// pumpLogs forwards the worker's stderr, one record per line, to the logger.
func (s *workerSandbox) pumpLogs(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.cfg.Logger.Info("worker", "pid", s.cmd.Process.Pid, "line", sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

// readLoop routes the worker's frames: the hello, output chunks to the
// running Execute, replies to their callers.
func (s *workerSandbox) readLoop(r io.Reader) {
	rd := ipc.NewReader(r)
	first := true
	for {
		m, err := rd.ReadMessage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			s.cfg.Logger.Error("corrupt frame from worker; killing it", "err", err)
			s.markDead(fmt.Errorf("%w: %w: %v", ErrDead, ErrProtocol, err))
			_ = s.cmd.Process.Kill() // the reaper waits for this loop to end
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if first {
			first = false
			s.hello <- m
			continue
		}
		s.mu.Lock()
		if m.Kind == ipc.KindOutput {
			if o, ok := s.outputs[m.ID]; ok {
				out := m.Body.(ipc.Output)
				s.mu.Unlock()
				if out.Stream == ipc.StreamStderr {
					o.stderr.WriteString(out.Data)
				} else {
					o.stdout.WriteString(out.Data)
				}
				continue
			}
			s.mu.Unlock()
			continue
		}
		ch, ok := s.pending[m.ID]
		delete(s.pending, m.ID)
		s.mu.Unlock()
		if ok {
			ch <- m
		}
	}
}

func (s *workerSandbox) failPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.pending {
		close(ch)
		delete(s.pending, id)
	}
}

// kill ends the process (idempotent) and releases the page once reaped.
func (s *workerSandbox) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.stdin.Close()
	<-s.exited
	s.page.Close()
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
		s.dead = fmt.Errorf("%w: %w (%v)", ErrWorkerExited, ErrDead, s.exit)
		return s.dead
	default:
	}
	return nil
}

func (s *workerSandbox) acquire(ctx context.Context) error {
	if err := s.deadErr(); err != nil {
		return err
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
	select {
	case m, ok := <-ch:
		if !ok {
			return ipc.Message{}, s.deadErr()
		}
		return m, replyErr(m)
	case <-ctx.Done():
		s.forget(id)
		return ipc.Message{}, fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
	}
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

func (s *workerSandbox) Initialize(ctx context.Context, text string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if _, err := s.call(ctx, ipc.KindInitialize, ipc.Initialize{Context: text}); err != nil {
		return err
	}
	s.inited.Store(true)
	return nil
}

func (s *workerSandbox) GetVariable(ctx context.Context, name string) (any, bool, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, false, err
	}
	defer s.release()
	if !s.inited.Load() {
		return nil, false, ErrNotInitialized
	}
	m, err := s.call(ctx, ipc.KindGetVariable, ipc.GetVariable{Name: name})
	if err != nil {
		return nil, false, err
	}
	r, ok := m.Body.(ipc.GetVariableReply)
	if !ok {
		return nil, false, fmt.Errorf("%w: %v in reply to get variable", ErrProtocol, m.Kind)
	}
	return convert.FromIPC(r.Value), r.Found, nil
}

func (s *workerSandbox) SetVariable(ctx context.Context, name string, v any) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if !s.inited.Load() {
		return ErrNotInitialized
	}
	wire := convert.ToIPC(v)
	if _, err := ipc.EncodeValue(wire); err != nil {
		return fmt.Errorf("supervisor: set variable %s: %w", name, err)
	}
	_, err := s.call(ctx, ipc.KindSetVariable, ipc.SetVariable{Name: name, Value: wire})
	return err
}

func (s *workerSandbox) Execute(ctx context.Context, code string) (*CodeExecution, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if !s.inited.Load() {
		return nil, ErrNotInitialized
	}
	r := &run{reason: make(chan error, 1)}
	s.mu.Lock()
	s.running = r
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
	}()
	streams := &execStreams{
		stdout: newCollector(s.cfg.MaxOutputLength, s.cfg.OnStdout),
		stderr: newCollector(s.cfg.MaxOutputLength, s.cfg.OnStderr),
	}
	start := time.Now()
	id, ch, err := s.send(ipc.KindExecute, ipc.Execute{Code: code}, streams)
	if err != nil {
		return nil, err
	}
	defer s.forget(id)

	var timeout <-chan time.Time
	if s.cfg.Timeout > 0 {
		t := time.NewTimer(s.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var why error
	var grace <-chan time.Time
	var m ipc.Message
	var got bool
	ctxDone, reason := ctx.Done(), r.reason
wait:
	for {
		select {
		case m, got = <-ch:
			break wait
		case <-timeout:
			why = ErrTimeout
		case <-ctxDone:
			why = fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx))
		case why = <-reason:
		case <-grace:
			s.cfg.Logger.Warn("code ignored the interrupt; killing the worker", "pid", s.info.PID, "grace", s.cfg.GracePeriod)
			s.markDead(fmt.Errorf("%w: %w: killed after ignoring the interrupt for %v", ErrWorkerExited, ErrDead, s.cfg.GracePeriod))
			s.kill()
			ce := s.execution(code, start, streams, nil)
			return ce, fmt.Errorf("%w (the code ignored KeyboardInterrupt and the worker was killed; the sandbox is dead)", why)
		}
		if why != nil && grace == nil {
			s.page.Store(ipc.SignalInterrupt)
			t := time.NewTimer(s.cfg.GracePeriod)
			defer t.Stop()
			grace = t.C
			timeout, ctxDone, reason = nil, nil, nil // acted on once
		}
	}
	if !got {
		ce := s.execution(code, start, streams, nil)
		if why != nil {
			return ce, fmt.Errorf("%w: %w", why, s.deadErr())
		}
		return ce, s.deadErr()
	}
	if err := replyErr(m); err != nil {
		if errors.Is(err, ErrDead) {
			s.markDead(err)
		}
		return s.execution(code, start, streams, nil), err
	}
	res, ok := m.Body.(ipc.Result)
	if !ok {
		return nil, fmt.Errorf("%w: %v in reply to execute", ErrProtocol, m.Kind)
	}
	ce := s.execution(code, start, streams, &res)
	return ce, why
}

func (s *workerSandbox) execution(code string, start time.Time, st *execStreams, res *ipc.Result) *CodeExecution {
	ce := &CodeExecution{Code: code, Stdout: st.stdout.String(), Stderr: st.stderr.String(), Duration: time.Since(start)}
	if res != nil {
		ce.Error, ce.ErrorType, ce.Traceback = res.Error, res.ErrorType, res.Traceback
		if res.DurationNanos > 0 {
			ce.Duration = time.Duration(res.DurationNanos)
		}
	}
	return ce
}

func (s *workerSandbox) Cancel() {
	s.mu.Lock()
	r := s.running
	s.mu.Unlock()
	if r != nil {
		r.stop(ErrCanceled)
	}
}

func (s *workerSandbox) Destroy() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.kill()
	return nil
}
