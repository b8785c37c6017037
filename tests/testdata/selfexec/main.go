// Command selfexec is a program outside rlm-sandbox's module that uses
// package supervisor with a zero Config, as a new user would. Run with no
// rlm-worker to be found, it gets a worker all the same: itself,
// re-executed. It prints a JSON report for tests/selfexec_test.go.
//
// With -runs N it instead times N starts (New to a sandbox that has
// answered Initialize) and prints them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"example.com/selfexec/early"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"zz.example/late"
)

func init() { early.Record("main") }

type report struct {
	PID  int             // this program's
	Info supervisor.Info // the sandbox's
	// WorkerPPID and WorkerArgv0 are read from /proc/<Info.PID>.
	WorkerPPID  int
	WorkerArgv0 string
	// CancelErr and CancelErrorType: what Execute of an endless loop
	// returned once Cancel was called.
	CancelErr       string
	Canceled        bool
	CancelErrorType string
	// AfterCancel is the output of code run after the cancel, and
	// AlivePID the worker's pid then.
	AfterCancel string
	AlivePID    int
	// Reaped: /proc/<Info.PID> is gone once Destroy has returned.
	Reaped bool
	// StartNS: with -runs, each start's duration.
	StartNS []int64 `json:",omitempty"`
	Error   string  `json:",omitempty"`
}

func main() {
	if os.Getenv("SELFEXEC_CALL") == "1" {
		supervisor.ServeWorkerIfChild()
	}
	runs := flag.Int("runs", 0, "time this many starts instead")
	flag.Parse()
	_ = late.Ran
	var r report
	r.PID = os.Getpid()
	var err error
	if *runs > 0 {
		err = timeStarts(&r, *runs)
	} else {
		err = run(&r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func config(lines chan string) supervisor.Config {
	return supervisor.Config{
		// The first start of a stock-wazero build on a machine compiles
		// Pyodide.
		StartTimeout: 10 * time.Minute,
		OnStdout: func(line string) {
			select {
			case lines <- line:
			default:
			}
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func run(r *report) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	lines := make(chan string, 16)
	sb, err := supervisor.New(ctx, config(lines))
	if err != nil {
		return fmt.Errorf("New: %w", err)
	}
	defer sb.Destroy()
	r.Info = sb.Info()
	if !r.Info.Worker {
		return nil
	}
	pid := r.Info.PID
	if r.WorkerPPID, err = ppid(pid); err != nil {
		return err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return err
	}
	r.WorkerArgv0, _, _ = strings.Cut(string(cmdline), "\x00")
	if err := sb.Initialize(ctx, ""); err != nil {
		return fmt.Errorf("Initialize: %w", err)
	}

	go func() {
		for line := range lines {
			if line == "spinning" {
				sb.Cancel()
				return
			}
		}
	}()
	ce, err := sb.Execute(ctx, "print('spinning', flush=True)\nwhile True: pass")
	r.CancelErr = fmt.Sprint(err)
	r.Canceled = errors.Is(err, supervisor.ErrCanceled)
	if ce != nil {
		r.CancelErrorType = ce.ErrorType
	}
	ce, err = sb.Execute(ctx, "print(6 * 7)")
	if err != nil {
		return fmt.Errorf("Execute after the cancel: %w", err)
	}
	r.AfterCancel = ce.Stdout
	r.AlivePID = sb.Info().PID
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return fmt.Errorf("the worker is gone after the cancel: %w", err)
	}

	if err := sb.Destroy(); err != nil {
		return fmt.Errorf("Destroy: %w", err)
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	r.Reaped = errors.Is(err, os.ErrNotExist)
	return nil
}

// ppid reads the parent of process pid from /proc/<pid>/stat.
func ppid(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strconv.Atoi(fields[1])
}

// timeStarts times n starts, after one that warms the caches.
func timeStarts(r *report, n int) error {
	ctx := context.Background()
	cfg := config(make(chan string))
	for i := -1; i < n; i++ {
		t0 := time.Now()
		sb, err := supervisor.New(ctx, cfg)
		if err != nil {
			return err
		}
		r.Info = sb.Info()
		if err := sb.Initialize(ctx, ""); err != nil {
			sb.Destroy()
			return err
		}
		d := time.Since(t0)
		if err := sb.Destroy(); err != nil {
			return err
		}
		if i >= 0 {
			r.StartNS = append(r.StartNS, d.Nanoseconds())
		}
	}
	return nil
}
