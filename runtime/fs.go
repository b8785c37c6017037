package runtime

import (
	"os"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

func osStderr() *os.File { return os.Stderr }

// buildFS lays out the guest's file system: the standard library where
// Pyodide puts it, a home directory and /tmp, a few devices, nothing of the
// host.
func (in *Interpreter) buildFS(cfg Config) (*vfs.FS, error) {
	fs := vfs.New(vfsClock(cfg.Now))
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
	if e := fs.AddDevice("/dev/rlm", in.channel, 0o600); e != vfs.ESUCCESS {
		return nil, e
	}
	if e := fs.AddDevice("/dev/rlm-bridge", &bridgeDevice{in: in, fn: cfg.Bridge}, 0o600); e != vfs.ESUCCESS {
		return nil, e
	}
	return fs, nil
}
