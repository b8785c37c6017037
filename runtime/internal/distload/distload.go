// Package distload loads the files of a Pyodide distribution from a list of
// index entries (local directories, file:// and http(s):// URLs), tried in
// order. Each file is checked against its expected SHA-256, downloads are
// kept in a content-addressed cache shared by every process of the machine,
// and an entry that fails for any reason is reported and skipped.
package distload

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Options says what to load and from where.
type Options struct {
	// Entries are tried in order until one yields every file and passes
	// Check.
	Entries []string
	// Files are the names to load from an entry, in the order they are
	// fetched (put small ones first: a wrong entry then fails cheaply).
	Files []string
	// SHA256 holds the expected hex SHA-256 of each file. A file without
	// one is accepted only when AllowUnverified is set.
	SHA256 map[string]string
	// AllowUnverified accepts files that have no expected hash.
	AllowUnverified bool
	// Cache keeps downloads, keyed by content hash. Nil: no cache.
	Cache *Cache
	// Timeout bounds fetching the files of one entry. Default: 2 minutes.
	Timeout time.Duration
	// Client fetches http(s) entries. Default: a client that honours the
	// proxy environment variables and waits at most 30 s for a response's
	// headers.
	Client *http.Client
	// Check, when set, validates the files of an entry; an error fails the
	// entry like a failed download does. It is not bound by Timeout.
	Check func(*Dist) error
	// Log, when set, is told about every entry that fails.
	Log func(entry string, err error)
	// Fetching, when set, is told before a file is downloaded over the
	// network (not when it comes from the cache or a local directory).
	Fetching func(url string)
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 2 * time.Minute

// maxFileSize caps a file read from an entry (pyodide.asm.wasm is ~10 MB).
const maxFileSize = 512 << 20

// Dist is the loaded files of one entry.
type Dist struct {
	// Entry is the entry the files came from, or "cache" when every file
	// was already in the cache.
	Entry string
	// Files maps each name of Options.Files to its contents.
	Files map[string][]byte
	// SHA256 maps each name to the hex SHA-256 of its contents.
	SHA256 map[string]string
}

// EntryError is why one entry failed.
type EntryError struct {
	Entry string
	Err   error
}

func (e *EntryError) Error() string { return e.Entry + ": " + e.Err.Error() }
func (e *EntryError) Unwrap() error { return e.Err }

// Error reports that no entry worked; it lists each one with its reason.
type Error struct {
	Entries []EntryError
}

func (e *Error) Error() string {
	if len(e.Entries) == 0 {
		return "no index URL to load Pyodide from"
	}
	var b strings.Builder
	b.WriteString("no index URL worked:")
	for _, ee := range e.Entries {
		b.WriteString("\n\t")
		b.WriteString(ee.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each entry's error.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Entries))
	for i := range e.Entries {
		errs[i] = &e.Entries[i]
	}
	return errs
}

// ErrHashMismatch reports a file whose SHA-256 is not the expected one.
var ErrHashMismatch = errors.New("SHA-256 mismatch")

// ErrNoHash reports a file without an expected hash while unverified
// loading is not allowed.
var ErrNoHash = errors.New("no expected SHA-256")

// Load tries the cache, then each entry in order, and returns the files of
// the first that works.
func Load(ctx context.Context, o Options) (*Dist, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Client == nil {
		o.Client = defaultClient
	}
	if !o.AllowUnverified {
		for _, name := range o.Files {
			if o.SHA256[name] == "" {
				return nil, fmt.Errorf("%s: %w (give its hash, or allow unverified loading)", name, ErrNoHash)
			}
		}
	}
	var failed []EntryError
	fail := func(entry string, err error) {
		failed = append(failed, EntryError{entry, err})
		if o.Log != nil {
			o.Log(entry, err)
		}
	}
	if d := o.fromCache(); d != nil {
		if err := o.check(d); err != nil {
			fail("cache "+o.Cache.Dir(), err)
		} else {
			return d, nil
		}
	}
	for _, entry := range o.Entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, commit, err := o.loadEntry(ctx, entry)
		if err == nil {
			err = o.check(d)
		}
		if err != nil {
			fail(entry, err)
			continue
		}
		commit()
		return d, nil
	}
	return nil, &Error{failed}
}

func (o *Options) check(d *Dist) error {
	if o.Check == nil {
		return nil
	}
	return o.Check(d)
}

// fromCache returns the files when every one has an expected hash and is
// in the cache: a warm cache needs no entry, so no network.
func (o *Options) fromCache() *Dist {
	if o.Cache == nil {
		return nil
	}
	d := &Dist{Entry: "cache", Files: map[string][]byte{}, SHA256: map[string]string{}}
	for _, name := range o.Files {
		want := o.SHA256[name]
		if want == "" {
			return nil
		}
		b, ok := o.Cache.Get(want)
		if !ok {
			return nil
		}
		d.Files[name], d.SHA256[name] = b, want
	}
	return d
}

// loadEntry fetches every file of one entry. commit caches the downloaded
// files that have no expected hash, under their URL; it is called only
// once the entry has passed Check, so the cache never holds an unverified
// file that was rejected.
func (o *Options) loadEntry(ctx context.Context, entry string) (d *Dist, commit func(), err error) {
	src, err := parseEntry(entry)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	d = &Dist{Entry: entry, Files: map[string][]byte{}, SHA256: map[string]string{}}
	type pending struct {
		key string
		b   []byte
	}
	var refs []pending
	for _, name := range o.Files {
		want := o.SHA256[name]
		var b []byte
		var ref string
		if src.local() {
			b, err = src.read(name)
		} else {
			b, ref, err = o.fetchCached(ctx, src, name, want)
		}
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				err = fmt.Errorf("%s: timed out after %v", name, o.Timeout)
			}
			return nil, nil, err
		}
		got := sum(b)
		if want != "" && got != want {
			return nil, nil, fmt.Errorf("%s: %w: got %s, want %s (tampered, or not the expected Pyodide version)", name, ErrHashMismatch, got, want)
		}
		d.Files[name], d.SHA256[name] = b, got
		switch {
		case ref != "":
			refs = append(refs, pending{ref, b})
		case src.local() && want != "":
			// Verified now: later starts read it from the cache, where
			// it is not hashed again.
			refs = append(refs, pending{"", b})
		}
	}
	commit = func() {
		for _, r := range refs {
			if h, err := o.Cache.Put(r.b); err == nil && r.key != "" {
				_ = o.Cache.SetRef(r.key, h)
			}
		}
	}
	return d, commit, nil
}

// fetchCached downloads one file through the cache. With an expected hash
// the cache is looked up by it, and the file is cached once verified;
// without, the cache is looked up by the file's URL, and ref is the key
// under which the caller caches the file if the entry is accepted. A
// per-key lock makes concurrent processes download a verified file once
// (an unverified one may be downloaded by each, as it is cached only
// after Check).
func (o *Options) fetchCached(ctx context.Context, src source, name, want string) (b []byte, ref string, err error) {
	url := src.url(name)
	if o.Cache == nil {
		if o.Fetching != nil {
			o.Fetching(url)
		}
		b, err = src.fetch(ctx, o.Client, name)
		return b, "", err
	}
	key := "sha256-" + want
	if want == "" {
		ref = "url-" + sum([]byte(url))
		key = ref
	}
	lookup := func() ([]byte, bool) {
		if want != "" {
			return o.Cache.Get(want)
		}
		h, ok := o.Cache.Ref(ref)
		if !ok {
			return nil, false
		}
		return o.Cache.Get(h)
	}
	if b, ok := lookup(); ok {
		return b, "", nil
	}
	unlock, err := o.Cache.Lock(ctx, key)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	if b, ok := lookup(); ok { // another process fetched it meanwhile
		return b, "", nil
	}
	if o.Fetching != nil {
		o.Fetching(url)
	}
	b, err = src.fetch(ctx, o.Client, name)
	if err != nil {
		return nil, "", err
	}
	if want == "" {
		return b, ref, nil
	}
	if sum(b) != want {
		return b, "", nil // the caller reports the mismatch; not cached
	}
	_, _ = o.Cache.Put(b) // a cache that cannot keep it (a full disk) fetches it again next time
	return b, "", nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// SHA256 returns the hex SHA-256 of b.
func SHA256(b []byte) string { return sum(b) }

// ParseSHA256 reads an expected hash written as hex, "sha256-<hex>" or a
// Subresource Integrity string "sha256-<base64>", and returns it as
// lowercase hex.
func ParseSHA256(s string) (string, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "sha256-")
	if len(v) == 64 {
		if b, err := hex.DecodeString(v); err == nil {
			return hex.EncodeToString(b), nil
		}
	}
	if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == sha256.Size && v != s {
		return hex.EncodeToString(b), nil
	}
	return "", fmt.Errorf("%q is not a SHA-256 (hex, sha256-<hex> or sha256-<base64>)", s)
}
