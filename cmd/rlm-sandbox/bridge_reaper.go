package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// bridgeReaperEnv marks the process rlm-sandbox starts from its own
// executable to clean up after its bridge commands (see bridgeReaper). Its
// only accepted value is "1".
const bridgeReaperEnv = "RLM_SANDBOX_BRIDGE_REAPER"

// reaperAllowed is set by main: only the command itself starts a reaper
// (a test binary calling run must not start itself).
var reaperAllowed bool

// reaper is a child process that outlives rlm-sandbox by as long as it
// takes to clean up after it. rlm-sandbox tells it, over a pipe, each
// bridge command's process group and rlm_query context file while they
// exist; when the pipe ends (rlm-sandbox exited, or was killed, SIGKILL
// included) it kills the groups still listed and removes the files.
// Pdeathsig alone kills only a command's shell: what the shell started
// (the command proper, often) would run on, and the file would stay.
type reaper struct {
	mu sync.Mutex
	w  *os.File // nil: no reaper could start; the commands get Pdeathsig only
}

// bridgeReaper is the process's reaper, started at its first use.
var bridgeReaper = sync.OnceValue(startReaper)

func startReaper() *reaper {
	if !reaperAllowed {
		return &reaper{}
	}
	exe := "/proc/self/exe"
	if st, err := os.Stat(exe); err != nil || !st.Mode().IsRegular() {
		if exe, err = os.Executable(); err != nil {
			return &reaper{}
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return &reaper{}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), bridgeReaperEnv+"=1")
	cmd.Stdin = r
	// A group of its own: a Ctrl-C at the terminal, or a signal to
	// rlm-sandbox's group, leaves it to clean up after the others.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return &reaper{}
	}
	r.Close()
	go cmd.Wait()
	return &reaper{w: w}
}

// tell sends the reaper one line: "+g PGID", "-g PGID", "+f PATH" or
// "-f PATH". A reaper that is gone is not replaced.
func (r *reaper) tell(op, what string) {
	if r.w == nil || strings.ContainsRune(what, '\n') {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, "%s %s\n", op, what)
}

func (r *reaper) addGroup(pgid int)      { r.tell("+g", strconv.Itoa(pgid)) }
func (r *reaper) forgetGroup(pgid int)   { r.tell("-g", strconv.Itoa(pgid)) }
func (r *reaper) addFile(path string)    { r.tell("+f", path) }
func (r *reaper) forgetFile(path string) { r.tell("-f", path) }

// reapBridges is the reaper's main: it reads in to its end, then kills
// the process groups and removes the files still listed.
func reapBridges(in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups, files := map[int]bool{}, map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		op, what, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch op {
		case "+g", "-g":
			if pgid, err := strconv.Atoi(what); err == nil && pgid > 1 {
				groups[pgid] = op == "+g"
			}
		case "+f", "-f":
			files[what] = op == "+f"
		}
	}
	for pgid, live := range groups {
		if live {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	for path, live := range files {
		if live {
			os.Remove(path)
		}
	}
	return 0
}
