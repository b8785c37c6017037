package harden

import (
	"errors"
	"os"
	"os/exec"
	_ "os/user" // links libc through cgo where there is a C compiler, as most programs are
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

const childEnv = "RLM_HARDEN_TEST_CHILD"

// TestMain lets the test binary be the process it locks down.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child locks itself down and prints what then fails.
func child() int {
	r := Apply()
	os.Stdout.WriteString("applied " + strings.Join(r.Applied, ",") + "\n")
	for _, why := range r.Refused {
		os.Stdout.WriteString("refused " + why + "\n")
	}
	check := func(what string, err error) {
		if errors.Is(err, os.ErrPermission) {
			os.Stdout.WriteString("denied " + what + "\n")
		} else {
			os.Stdout.WriteString("allowed " + what + ": " + errString(err) + "\n")
		}
	}
	_, err := os.Open("/etc/hostname")
	check("open", err)
	_, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	check("socket", err)
	// What must keep working: threads, timers, pipes, memory.
	done := make(chan int)
	go func() {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		v := 0
		if err == nil {
			b[0] = 1
			v = int(b[0])
			err = unix.Munmap(b)
		}
		if err != nil {
			os.Stdout.WriteString("mmap failed: " + err.Error() + "\n")
		}
		done <- v
	}()
	if <-done == 1 {
		os.Stdout.WriteString("ok\n")
	}
	// New threads after the lock-down: each goroutine holds its thread in
	// a blocking call, so the runtime starts others (with glibc's
	// pthread_create in a binary linked with cgo).
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			ts := unix.Timespec{Nsec: 20_000_000}
			_ = unix.Nanosleep(&ts, nil)
		}()
	}
	wg.Wait()
	os.Stdout.WriteString("threads\n")
	return 0
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestApply(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("%s", out)
	applied := strings.Split(strings.TrimPrefix(lines[0], "applied "), ",")
	for _, layer := range []string{NoNewPrivs, Rlimits, Seccomp} {
		if !slices.Contains(applied, layer) {
			t.Errorf("%s not applied", layer)
		}
	}
	for _, want := range []string{"denied open", "denied socket", "ok", "threads"} {
		if !slices.Contains(lines, want) {
			t.Errorf("no %q in the child's output", want)
		}
	}
}

func TestFilterAssembles(t *testing.T) {
	prog, err := filter(12345)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instructions, %d system calls allowed outright", len(prog), len(allowed))
	if len(prog) == 0 || len(prog) > 4096 {
		t.Fatalf("%d instructions", len(prog))
	}
	last := prog[len(prog)-1]
	if last.Code != ret || last.K != unix.SECCOMP_RET_KILL_PROCESS {
		t.Errorf("last instruction %+v", last)
	}
}
