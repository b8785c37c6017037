package runtime

import (
	"os"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// fsEpoch is the time of the files and directories a guest starts with.
var fsEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func osStderr() *os.File { return os.Stderr }

// buildFS lays out the guest's file system: the standard library where
// Pyodide puts it, a home directory and /tmp, a few devices, nothing of the
// host.
func (in *Interpreter) buildFS(cfg Config) (*vfs.FS, error) {
	// The layout gets fixed times, so that every interpreter's is the same
	// (a boot snapshot holds what Python learnt of it, zipimport's view of
	// the stdlib zip for one); what the guest does later is timed by Now.
	fs := vfs.New(func() int64 { return fsEpoch })
	defer fs.SetClock(vfsClock(cfg.Now))
	fs.SetLimit(cfg.DiskLimit)
	fs.SetNodeLimit(100_000)
	for _, d := range []string{"/lib/python3.14/site-packages", "/home/pyodide", "/tmp", "/dev"} {
		if e := fs.MkdirAll(d, 0o755); e != vfs.ESUCCESS {
			return nil, e
		}
	}
	if e := fs.Chmod("/tmp", 0o1777); e != vfs.ESUCCESS {
		return nil, e
	}
	stdlib := in.eng.stdlib
	if in.stdlib != nil {
		stdlib = in.stdlib
	}
	if e := fs.AddFile("/lib/python314.zip", stdlib, true); e != vfs.ESUCCESS {
		return nil, e
	}
	if e := fs.AddDevice("/dev/null", vfs.NullDevice{}, 0o666); e != vfs.ESUCCESS {
		return nil, e
	}
	if e := fs.AddDevice("/dev/zero", vfs.ZeroDevice{}, 0o666); e != vfs.ESUCCESS {
		return nil, e
	}
	// The standard streams (writing to /dev/stdout was writing a file
	// there, and the output was lost), a terminal that is the output,
	// random numbers: as Emscripten's /dev has them. They reach the host,
	// made after the file system, through in.host.
	for _, d := range []struct {
		name string
		kind int
	}{
		{"stdin", devStdin}, {"stdout", devStdout}, {"stderr", devStderr},
		{"tty", devStdout}, {"random", devRandom}, {"urandom", devRandom},
	} {
		if e := fs.AddDevice("/dev/"+d.name, hostDevice{in, d.kind}, 0o666); e != vfs.ESUCCESS {
			return nil, e
		}
	}
	limit := deviceLimit(cfg.MemoryLimit)
	in.channel.max = limit
	if e := fs.AddDevice("/dev/rlm", in.channel, 0o600); e != vfs.ESUCCESS {
		return nil, e
	}
	bridge := &bridgeDevice{in: in, fn: cfg.Bridge, inline: cfg.BridgeInline, batch: cfg.BridgeBatch, conc: cfg.BridgeConcurrency, max: limit}
	if e := fs.AddDevice("/dev/rlm-bridge", bridge, 0o600); e != vfs.ESUCCESS {
		return nil, e
	}
	if e := fs.AddDevice("/dev/rlm-llm", &llmDevice{b: bridge}, 0o600); e != vfs.ESUCCESS {
		return nil, e
	}
	// No new names in /dev: opening /dev/tty1 for writing fails (EROFS)
	// instead of making a file that nothing reads. /lib and its
	// python3.14 are read-only too, as the README says: renaming /lib
	// away took the standard library with it (site-packages stays
	// writable).
	for _, dir := range []string{"/dev", "/lib", "/lib/python3.14"} {
		if e := fs.SetReadOnly(dir, true); e != vfs.ESUCCESS {
			return nil, e
		}
	}
	return fs, nil
}

// The host's devices in /dev.
const (
	devStdin = iota
	devStdout
	devStderr
	devRandom
)

// hostDevice is one of the host's devices in /dev; its driver is the
// interpreter's host's, which is made after the file system.
type hostDevice struct {
	in   *Interpreter
	kind int
}

func (d hostDevice) driver() vfs.Device {
	if d.kind == devRandom {
		return d.in.host.Random()
	}
	return d.in.host.Stdio(d.kind)
}

func (d hostDevice) Read(p []byte) (int, vfs.Errno)  { return d.driver().Read(p) }
func (d hostDevice) Write(p []byte) (int, vfs.Errno) { return d.driver().Write(p) }
