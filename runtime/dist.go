package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// PyodideVersion is the Pyodide release this runtime is built and tested
// against (Python 3.14).
const PyodideVersion = "314.0.7"

// Distribution is where the Pyodide files come from. The runtime reads two
// files from it: pyodide.asm.wasm (already translated to the exnref
// exception-handling form, see RATIONALE.md) and python_stdlib.zip.
type Distribution interface {
	// ReadFile returns the contents of the named file of the distribution.
	ReadFile(name string) ([]byte, error)
	// String describes where the distribution is, for error messages.
	String() string
}

// ErrDistribution reports a missing or unusable Pyodide distribution.
var ErrDistribution = errors.New("runtime: Pyodide distribution not usable")

// Dir is a Distribution in a local directory, as `make` prepares it.
type Dir string

// ReadFile implements Distribution.
func (d Dir) ReadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s (run `make` to fetch Pyodide %s)", ErrDistribution, string(d), name, PyodideVersion)
	}
	return b, err
}

func (d Dir) String() string { return string(d) }

// CacheDir is the directory rlm-sandbox keeps its caches in:
// $RLM_SANDBOX_CACHE, else the user cache directory's rlm-sandbox folder.
func CacheDir() string {
	if d := os.Getenv("RLM_SANDBOX_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rlm-sandbox")
	}
	return filepath.Join(os.TempDir(), "rlm-sandbox")
}

// DefaultDistribution is the directory `make` fills:
// $RLM_SANDBOX_PYODIDE, else CacheDir()/pyodide-<PyodideVersion>.
func DefaultDistribution() Dir {
	if d := os.Getenv("RLM_SANDBOX_PYODIDE"); d != "" {
		return Dir(d)
	}
	return Dir(filepath.Join(CacheDir(), "pyodide-"+PyodideVersion))
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}
