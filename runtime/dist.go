package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PyodideVersion is the Pyodide release this runtime is built and tested
// against (Python 3.14).
const PyodideVersion = "314.0.7"

// The files the runtime loads from a Pyodide distribution, in the order they
// are fetched (the small lock file first, so that a wrong index URL fails
// before the large downloads).
const (
	fileLock   = "pyodide-lock.json"
	fileStdlib = "python_stdlib.zip"
	fileWasm   = "pyodide.asm.wasm"
)

var distFiles = []string{fileLock, fileStdlib, fileWasm}

// pinnedSHA256 is the SHA-256 of each file of Pyodide PyodideVersion, as
// published in the npm package pyodide@314.0.7 (whose sha512 integrity
// scripts/fetch-pyodide.sh checks). Files loaded from an index URL must
// match it unless Config.Integrity or Config.AllowUnverified says otherwise.
var pinnedSHA256 = map[string]string{
	fileLock:   "5dc2fc119108bc148c7457dc86e7675b5c87e1cafd420b9c34c1eaef7b36c010",
	fileStdlib: "fa1957e5777068fc4f7437f96d860ae2fbe9c19732ba06c84e004ec16dd7dd7a",
	fileWasm:   "cc36e3cab04fdfc9a63ff13eb52eae2b911bf46c025cc7b281f394bd3de1d5e6",
}

// The public copies of Pyodide PyodideVersion, tried after the local cache.
const (
	cdnIndexURL = "https://cdn.jsdelivr.net/pyodide/v" + PyodideVersion + "/full/"
	npmIndexURL = "https://cdn.jsdelivr.net/npm/pyodide@" + PyodideVersion + "/"
)

// IndexURLEnv is the environment variable that overrides DefaultIndexURL:
// a comma-separated list of index URLs.
const IndexURLEnv = "RLM_PYODIDE_INDEX_URL"

// DefaultIndexURL is where Pyodide is loaded from when neither
// Config.IndexURL nor $RLM_PYODIDE_INDEX_URL says otherwise: the directory
// `make` fills (DefaultDistribution()), then the jsDelivr CDN, then
// jsDelivr's mirror of the npm package. Downloads are cached (see
// Config.CacheDir), so a machine that has loaded Pyodide once, or ran
// `make`, never touches the network again.
func DefaultIndexURL() []string {
	return []string{string(DefaultDistribution()), cdnIndexURL, npmIndexURL}
}

// indexURLFromEnv returns $RLM_PYODIDE_INDEX_URL split at commas, or nil.
func indexURLFromEnv() []string {
	var list []string
	for _, s := range strings.Split(os.Getenv(IndexURLEnv), ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	return list
}

// Distribution is where the Pyodide files come from when Config.Distribution
// is set. The runtime reads two files from it: pyodide.asm.wasm (stock, or
// already translated to the exnref exception-handling form) and
// python_stdlib.zip. They are not checked against any hash: the caller
// vouches for them.
type Distribution interface {
	// ReadFile returns the contents of the named file of the distribution.
	ReadFile(name string) ([]byte, error)
	// String describes where the distribution is, for error messages.
	String() string
}

// ErrDistribution reports a missing or unusable Pyodide distribution.
var ErrDistribution = errors.New("runtime: Pyodide distribution not usable")

// Dir is a Distribution in a local directory, as `make` prepares it. Unlike
// a directory given in Config.IndexURL, its files are not checked against
// hashes.
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
// $RLM_SANDBOX_CACHE, else the user cache directory's rlm-sandbox folder,
// else (no $HOME, as for a service) rlm-sandbox-<uid> in the temporary
// directory: one per user, since the cache holds native code and memory
// images that sandboxes load.
func CacheDir() string {
	if d := os.Getenv("RLM_SANDBOX_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rlm-sandbox")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rlm-sandbox-%d", os.Getuid()))
}

// DefaultDistribution is the directory `make` fills with the stock files of
// the npm package: $RLM_SANDBOX_PYODIDE, else
// CacheDir()/pyodide-npm-<PyodideVersion>. It is the first entry of
// DefaultIndexURL.
func DefaultDistribution() Dir {
	if d := os.Getenv("RLM_SANDBOX_PYODIDE"); d != "" {
		return Dir(d)
	}
	return Dir(filepath.Join(CacheDir(), "pyodide-npm-"+PyodideVersion))
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}
