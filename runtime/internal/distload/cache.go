package distload

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cache is a content-addressed store in a directory, shared by every
// process that opens the same directory:
//
//	blobs/sha256-<hex>      a file whose SHA-256 is <hex>
//	blobs/sha256-<hex>.crc  its size and CRC-32C, written once the blob's
//	                        SHA-256 was checked
//	refs/<key>              the <hex> of the blob that <key> stands for
//	locks/<key>.lock        flock(2) targets, so that processes fill a key once
//
// Get, Has and Ref mark what they find as used (a blob's mark is its
// .crc), and Trim removes what was not used for a while.
//
// Files appear only by renaming a complete temporary file. A blob's
// SHA-256 is checked when it enters the cache (or, for a blob without a
// .crc, the first time it is read); later reads check its size and CRC-32C
// instead, which is some 30 times cheaper and still catches a truncated or
// damaged file, so a half-written or damaged entry is never used.
type Cache struct{ dir string }

// OpenCache returns the cache in dir; nil when dir is "".
func OpenCache(dir string) *Cache {
	if dir == "" {
		return nil
	}
	return &Cache{dir: dir}
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

var (
	hexRe = regexp.MustCompile(`^[0-9a-f]{64}$`)
	keyRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

func (c *Cache) blobPath(hex string) string {
	return filepath.Join(c.dir, "blobs", "sha256-"+hex)
}

// Get returns the blob whose SHA-256 is hex. A blob that does not hash to
// its name is removed and reported missing.
func (c *Cache) Get(hex string) ([]byte, bool) {
	if c == nil || !hexRe.MatchString(hex) {
		return nil, false
	}
	p := c.blobPath(hex)
	b, err := MapFile(p)
	if err != nil {
		return nil, false
	}
	if want, err := os.ReadFile(p + ".crc"); err == nil && string(want) == crcLine(b) {
		MarkUsed(p + ".crc")
		return b, true
	}
	if sum(b) != hex {
		mapped.Delete(unsafe.SliceData(b))
		_ = unix.Munmap(b)
		_ = os.Remove(p)
		_ = os.Remove(p + ".crc")
		return nil, false
	}
	_ = WriteAtomic(p+".crc", []byte(crcLine(b)))
	return b, true
}

// MapFile returns the contents of the file at path, mapped read-only
// (shared with every process that maps it, and not copied into the Go
// heap). The mapping lives as long as the process: the callers keep the
// files (the module, the standard library) for their whole life. Writing
// to the returned slice faults.
func MapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, fmt.Errorf("distload: %s is too large to map", path)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err == nil {
		mapped.Store(unsafe.SliceData(b), len(b))
	}
	return b, err
}

// mapped records the mappings MapFile made (start → length).
var mapped sync.Map

// DropPages tells the kernel that the process does not need the pages of
// b, a file MapFile mapped, for now: they leave the process's resident set
// (they stay in the page cache) and are read again if touched. Slices that
// MapFile did not return are left alone.
func DropPages(b []byte) {
	if len(b) == 0 {
		return
	}
	if n, ok := mapped.Load(unsafe.SliceData(b)); ok && n.(int) == len(b) {
		_ = unix.Madvise(b, unix.MADV_DONTNEED)
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcLine is the content of a blob's .crc file.
func crcLine(b []byte) string {
	return fmt.Sprintf("%d %08x\n", len(b), crc32.Checksum(b, castagnoli))
}

// Has reports whether the blob whose SHA-256 is hex is in the cache, with
// the size its .crc records (without reading it).
func (c *Cache) Has(hex string) bool {
	if c == nil || !hexRe.MatchString(hex) {
		return false
	}
	p := c.blobPath(hex)
	st, err := os.Stat(p)
	if err != nil {
		return false
	}
	line, err := os.ReadFile(p + ".crc")
	if err != nil {
		return false
	}
	var size int64
	if _, err = fmt.Sscan(string(line), &size); err != nil || size != st.Size() {
		return false
	}
	MarkUsed(p + ".crc")
	return true
}

// Put stores b and returns its hex SHA-256.
func (c *Cache) Put(b []byte) (string, error) {
	h := sum(b)
	if c == nil {
		return h, nil
	}
	p := c.blobPath(h)
	if st, err := os.Stat(p); err == nil && st.Size() == int64(len(b)) {
		if _, err := os.Stat(p + ".crc"); err == nil {
			return h, nil
		}
	} else if err := WriteAtomic(p, b); err != nil {
		return h, err
	}
	return h, WriteAtomic(p+".crc", []byte(crcLine(b)))
}

// Ref returns the hex hash recorded for key.
func (c *Cache) Ref(key string) (string, bool) {
	if c == nil || !keyRe.MatchString(key) {
		return "", false
	}
	p := filepath.Join(c.dir, "refs", key)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	MarkUsed(p)
	h := strings.TrimSpace(string(b))
	return h, hexRe.MatchString(h)
}

// SetRef records that key stands for the blob whose SHA-256 is hex.
func (c *Cache) SetRef(key, hex string) error {
	if c == nil {
		return nil
	}
	if !keyRe.MatchString(key) || !hexRe.MatchString(hex) {
		return fmt.Errorf("distload: bad cache ref %q -> %q", key, hex)
	}
	return WriteAtomic(filepath.Join(c.dir, "refs", key), []byte(hex+"\n"))
}

// Derive returns what compute makes of in, recorded under kind and the
// SHA-256 of in, so that it is computed once per machine (processes that
// need it at the same time wait for the first). When compute returns in
// unchanged (the same slice), only the record is written, not a copy.
//
// inHash is the SHA-256 of in when the caller knows it ("": compute it).
// Derive returns the SHA-256 of its result too.
func (c *Cache) Derive(ctx context.Context, kind string, in []byte, inHash string, compute func() ([]byte, error)) ([]byte, string, error) {
	if inHash == "" {
		inHash = sum(in)
	}
	if c == nil {
		out, err := compute()
		if err != nil {
			return nil, "", err
		}
		return out, sum(out), nil
	}
	key := derivedKey(kind, inHash)
	lookup := func() ([]byte, string, bool) {
		h, ok := c.Ref(key)
		switch {
		case !ok:
			return nil, "", false
		case h == inHash:
			return in, h, true
		}
		b, ok := c.Get(h)
		return b, h, ok
	}
	if b, h, ok := lookup(); ok {
		return b, h, nil
	}
	unlock, err := c.Lock(ctx, key)
	if err != nil && ctx.Err() != nil {
		return nil, "", err
	}
	if err == nil {
		defer unlock()
		if b, h, ok := lookup(); ok {
			return b, h, nil
		}
	}
	out, err := compute()
	if err != nil {
		return nil, "", err
	}
	// What the cache cannot keep (a full disk, a cache this user cannot
	// write) is computed again by the next process: not an error.
	h := inHash
	if len(out) != len(in) || len(out) > 0 && &out[0] != &in[0] {
		h, err = c.Put(out)
	}
	if err == nil {
		_ = c.SetRef(key, h)
	}
	return out, h, nil
}

// derivedKey is the ref under which Derive records what kind makes of the
// blob whose SHA-256 is inHash.
func derivedKey(kind, inHash string) string { return kind + "-" + inHash }

// Derived returns the SHA-256 of what Derive recorded that kind makes of
// the blob whose SHA-256 is inHash, without reading either.
func (c *Cache) Derived(kind, inHash string) (string, bool) {
	return c.Ref(derivedKey(kind, inHash))
}

// TestHookLockWait, when set, is called each time Lock has to wait for
// another holder of a lock. Tests use it to make sure that two processes
// really contend; it must not be set otherwise.
var TestHookLockWait func(key string)

// Lock takes the exclusive lock named key, shared with other processes
// (flock(2) on locks/<key>.lock), waiting for it as long as ctx allows.
func (c *Cache) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if !keyRe.MatchString(key) {
		return nil, fmt.Errorf("distload: bad lock name %q", key)
	}
	dir := filepath.Join(c.dir, "locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	release := func() {
		_ = unix.Flock(fd, unix.LOCK_UN)
		f.Close()
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return release, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("distload: lock %s: %w", f.Name(), err)
	}
	if TestHookLockWait != nil {
		TestHookLockWait(key)
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(fd, unix.LOCK_EX)
			if err != unix.EINTR {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("distload: lock %s: %w", f.Name(), err)
		}
		return release, nil
	case <-ctx.Done():
		go func() { // give the lock back whenever the wait ends
			if <-got == nil {
				release()
			} else {
				f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// WriteAtomic writes the concatenation of parts to path through a
// temporary file in the same directory and a rename, so readers see the
// whole file or none.
func WriteAtomic(path string, parts ...[]byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	for _, b := range parts {
		if err == nil {
			_, err = tmp.Write(b)
		}
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
