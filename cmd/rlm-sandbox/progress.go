package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress shows the steps of a long task: on a terminal, one line per
// step with a spinner, the latest notice and the elapsed time, redrawn in
// place; otherwise plain lines, one when a step starts and one when it
// ends.
type progress struct {
	w   io.Writer
	tty bool

	mu     sync.Mutex
	label  string
	detail string
	start  time.Time
	stop   chan struct{}
	exited chan struct{}
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty} }

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// begin starts a step.
func (p *progress) begin(label string) {
	p.mu.Lock()
	p.label, p.detail, p.start = label, "", time.Now()
	p.mu.Unlock()
	if !p.tty {
		fmt.Fprintf(p.w, "%s ...\n", label)
		return
	}
	p.stop, p.exited = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.exited)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			p.draw(spinner[i%len(spinner)])
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (p *progress) draw(mark string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("%s %s", mark, p.label)
	if p.detail != "" {
		line += ": " + p.detail
	}
	fmt.Fprintf(p.w, "\r\033[K%s (%.1fs)", line, time.Since(p.start).Seconds())
}

// end finishes the step with its outcome.
func (p *progress) end(err error, result string) {
	if p.tty {
		close(p.stop)
		<-p.exited
	}
	p.mu.Lock()
	label, elapsed := p.label, time.Since(p.start).Seconds()
	p.mu.Unlock()
	switch {
	case err != nil && p.tty:
		fmt.Fprintf(p.w, "\r\033[K✗ %s: failed (%.1fs)\n", label, elapsed)
	case err != nil:
		fmt.Fprintf(p.w, "%s: failed (%.1fs)\n", label, elapsed)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K✓ %s: %s (%.1fs)\n", label, result, elapsed)
	default:
		fmt.Fprintf(p.w, "%s: %s (%.1fs)\n", label, result, elapsed)
	}
}

// Write receives notices (one line each) from the work in progress: the
// step's detail on a terminal, a plain line otherwise.
func (p *progress) Write(b []byte) (int, error) {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "rlm-sandbox: "))
	if s == "" {
		return len(b), nil
	}
	if !p.tty {
		fmt.Fprintf(p.w, "  %s\n", s)
		return len(b), nil
	}
	p.mu.Lock()
	p.detail = s
	p.mu.Unlock()
	return len(b), nil
}
