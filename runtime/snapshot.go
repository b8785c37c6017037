package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/distload"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/emscripten"
	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/linmem"
	"github.com/tetratelabs/wazero/api"
	"golang.org/x/sys/unix"
)

// A boot snapshot is the state of an interpreter right after boot (CPython
// initialised, the bootstrap run, the RLM helpers installed, the traceback
// machinery and common modules warm): its linear memory and the little
// host-side state the guest depends on. It is written once per machine
// next to the compilation cache; later interpreters map it copy-on-write
// instead of booting (see RATIONALE.md, "Boot snapshots").
//
// The file is a header and the memory image:
//
//	[0:8]    snapshotMagic
//	[8:12]   length of the JSON header, little-endian
//	[12:...] the JSON header (snapshotMeta)
//	[imageAlign:imageAlign+MemSize]  the linear memory
//
// The file name and the header both carry the key, which covers
// everything the image depends on (snapshotKey); the header carries the
// CRC-32C of the image, checked when a process first loads the file.

const (
	snapshotMagic = "RLMSNAP\x01"
	// snapshotFormat changes whenever what a snapshot captures, or the
	// host-side state the guest sees at boot, changes.
	snapshotFormat = "4"
	imageAlign     = 64 << 10
)

// snapshotEnv turns boot snapshots off when set to "0" or "off".
const snapshotEnv = "RLM_SANDBOX_SNAPSHOT"

// ErrSnapshot reports a boot snapshot that cannot be used: it is then
// ignored (the interpreter boots normally) and rebuilt.
var ErrSnapshot = errors.New("runtime: boot snapshot unusable")

// snapshotMeta is the JSON header of a snapshot.
type snapshotMeta struct {
	Key        string
	MemSize    uint64
	CRC        uint32
	StackPtr   uint64
	RunFn      uint32
	TakeFn     uint32
	ArityCache uint32
	TrampSlot  uint32
	Version    string
	Fast       fastObjects
	Host       emscripten.State
}

// bootImage is a verified snapshot, its file kept open for the process's
// lifetime (interpreters map it, privately).
type bootImage struct {
	meta snapshotMeta
	file *os.File
}

// snapshots is the per-engine snapshot state, by key.
type snapshots struct {
	mu    sync.Mutex
	keys  map[string]*snapshotState
	byLib map[string]string // snapshotKey's result, by mounted stdlib
}

type snapshotState struct {
	img    *bootImage
	tried  bool // the file was looked for (and img set if usable)
	failed bool // writing it failed in this process: don't retry
}

func (s *snapshots) state(key string) *snapshotState {
	if s.keys == nil {
		s.keys = map[string]*snapshotState{}
	}
	st := s.keys[key]
	if st == nil {
		st = &snapshotState{}
		s.keys[key] = st
	}
	return st
}

func snapshotsEnabled(cfg Config) bool {
	if cfg.NoSnapshot {
		return false
	}
	switch strings.ToLower(os.Getenv(snapshotEnv)) {
	case "0", "off", "false", "no":
		return false
	}
	return true
}

func (e *engine) snapshotDir() string { return filepath.Join(e.cacheDir, "snapshot") }

func (e *engine) snapshotPath(key string) string {
	return filepath.Join(e.snapshotDir(), "boot-"+key[:32]+".img")
}

// snapshotKey names everything a boot image depends on: the module, the
// mounted standard library (stdlib: the bytecode-compiled zip, else the
// stock one), the guest code run at boot, the environment, and the
// rlm-sandbox build (the Go side lays out the file system and descriptors
// the guest sees).
func (e *engine) snapshotKey(stdlib []byte) string {
	lib := "stock " + e.stdlibID
	if stdlib != nil {
		lib = "bytecode " + filepath.Base(e.pycPath()) + " " + digest([]byte(preparePy))
	}
	e.snap.mu.Lock()
	defer e.snap.mu.Unlock()
	if key, ok := e.snap.byLib[lib]; ok {
		return key
	}
	h := sha256.New()
	for _, part := range []string{
		"rlm-sandbox boot snapshot", snapshotFormat, PyodideVersion, e.wasmID, lib,
		bootPy, rlmPy, strings.Join(guestEnv, "\x00"), buildIdentity(),
	} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	key := hex.EncodeToString(h.Sum(nil))
	if e.snap.byLib == nil {
		e.snap.byLib = map[string]string{}
	}
	e.snap.byLib[lib] = key
	return key
}

var (
	buildIDOnce sync.Once
	buildID     string
)

// buildIdentity identifies the rlm-sandbox code in this binary: its module
// version when it is a dependency, the VCS revision of a clean build, else
// the executable file itself (a test binary, a build from a modified tree).
func buildIdentity() string {
	buildIDOnce.Do(func() {
		const mod = "github.com/rlm-sandbox/rlm-sandbox"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == mod && d.Version != "" && d.Version != "(devel)" && d.Replace == nil {
					buildID = "module " + d.Version + " " + d.Sum
					return
				}
			}
			if bi.Main.Path == mod {
				var rev string
				modified := true
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.modified":
						modified = s.Value != "false"
					}
				}
				if rev != "" && !modified {
					buildID = "vcs " + rev
					return
				}
			}
		}
		buildID = "exe " + exeDigest()
	})
	return buildID
}

// exeDigest identifies the running executable by its file's identity and
// modification time: rebuilding it gives another.
func exeDigest() string {
	p, err := os.Executable()
	if err != nil {
		return "unknown " + fmt.Sprint(time.Now().UnixNano())
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "unknown " + fmt.Sprint(time.Now().UnixNano())
	}
	return fmt.Sprintf("%s dev %d ino %d size %d mtime %d.%09d", p, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// bootImage returns the verified snapshot for this engine, loading it the
// first time; nil when there is none or it is unusable (the reason is
// reported on notice and the bad file removed, so that it is rebuilt).
func (e *engine) bootImage(key string, notice io.Writer) *bootImage {
	e.snap.mu.Lock()
	defer e.snap.mu.Unlock()
	st := e.snap.state(key)
	if st.tried {
		return st.img
	}
	st.tried = true
	path := e.snapshotPath(key)
	img, err := loadSnapshot(path, key)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(notice, "rlm-sandbox: ignoring the boot snapshot %s: %v; it will be rebuilt\n", path, err)
			_ = os.Remove(path)
		}
		return nil
	}
	st.img = img
	distload.MarkBeside(path)
	return img
}

// loadSnapshot maps a snapshot file and checks its key, size and CRC.
func loadSnapshot(path, key string) (*bootImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	img, err := mapSnapshot(f, key)
	if err != nil {
		f.Close()
		return nil, err
	}
	return img, nil
}

// mapSnapshot checks a snapshot through a temporary read-only mapping
// (kept, the pages checked would count twice in the process's RSS).
func mapSnapshot(f *os.File, key string) (*bootImage, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < imageAlign {
		return nil, fmt.Errorf("%w: truncated (%d bytes)", ErrSnapshot, st.Size())
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: map: %v", ErrSnapshot, err)
	}
	defer unix.Munmap(data)
	meta, err := checkSnapshot(data, key)
	if err != nil {
		return nil, err
	}
	return &bootImage{meta: meta, file: f}, nil
}

func checkSnapshot(data []byte, key string) (snapshotMeta, error) {
	var meta snapshotMeta
	if !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		return meta, fmt.Errorf("%w: not a boot snapshot (bad magic)", ErrSnapshot)
	}
	n := binary.LittleEndian.Uint32(data[8:12])
	if 12+uint64(n) > imageAlign {
		return meta, fmt.Errorf("%w: header of %d bytes", ErrSnapshot, n)
	}
	if err := json.Unmarshal(data[12:12+n], &meta); err != nil {
		return meta, fmt.Errorf("%w: header: %v", ErrSnapshot, err)
	}
	if meta.Key != key {
		return meta, fmt.Errorf("%w: made for another build (key %.12s…, want %.12s…)", ErrSnapshot, meta.Key, key)
	}
	if meta.MemSize == 0 || meta.MemSize%wasmPageSize != 0 || uint64(len(data)) != imageAlign+meta.MemSize {
		return meta, fmt.Errorf("%w: %d bytes for a memory of %d (truncated?)", ErrSnapshot, len(data), meta.MemSize)
	}
	if got := crc32.Checksum(data[imageAlign:], castagnoli); got != meta.CRC {
		return meta, fmt.Errorf("%w: corrupt (CRC-32C %08x, want %08x)", ErrSnapshot, got, meta.CRC)
	}
	return meta, nil
}

const wasmPageSize = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot writes the image of a freshly booted interpreter, unless
// another process did meanwhile. Processes that boot at once on a machine
// without a snapshot write it once (a flock'd key), and readers only ever
// see a whole file (rename).
func (e *engine) writeSnapshot(meta snapshotMeta, mem []byte) error {
	dir := e.snapshotDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := e.snapshotPath(meta.Key)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	meta.MemSize = uint64(len(mem))
	meta.CRC = crc32.Checksum(mem, castagnoli)
	hdr, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if 12+len(hdr) > imageAlign {
		return fmt.Errorf("runtime: snapshot header of %d bytes", len(hdr))
	}
	head := make([]byte, imageAlign)
	copy(head, snapshotMagic)
	binary.LittleEndian.PutUint32(head[8:], uint32(len(hdr)))
	copy(head[12:], hdr)
	if err := distload.WriteAtomic(path, head, mem); err != nil {
		return err
	}
	pruneSnapshots(dir, path)
	if testHookSnapshotWritten != nil {
		testHookSnapshotWritten()
	}
	return nil
}

// testHookSnapshotWritten, when set, is called after a snapshot is written.
var testHookSnapshotWritten func()

// pruneSnapshots removes the snapshots of other builds, keeping the few
// used last (bootImage marks the one it loads; other binaries may still be
// using them; a process that already mapped one is not affected by its
// removal). trimCache removes those unused for long.
func pruneSnapshots(dir, keep string) {
	const keepNewest = 6
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		if info, err := de.Info(); err == nil {
			if strings.HasPrefix(name, ".boot-") && strings.HasSuffix(name, ".tmp") && time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(p) // left by a process that died writing it
			}
			if strings.HasPrefix(name, "boot-") && strings.HasSuffix(name, ".img") && p != keep {
				files = append(files, file{p, distload.LastUseOf(p, p+distload.SidecarSuffix)})
			}
		}
	}
	slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
	for i, f := range files {
		if i >= keepNewest-1 && time.Since(f.mod) > 10*time.Minute {
			_ = os.Remove(f.path)
			_ = os.Remove(f.path + distload.SidecarSuffix)
		}
	}
}

// restore puts a freshly instantiated interpreter (its modules
// instantiated, the trampoline installed, nothing run) in the state of the
// boot image: the memory mapped copy-on-write, the stack pointer, the
// trampoline's cache, the host's descriptors.
func (in *Interpreter) restore(img *bootImage) error {
	t0 := time.Now()
	m := img.meta
	if in.trampSlot != m.TrampSlot {
		return fmt.Errorf("%w: the trampoline is at slot %d, the image expects %d", ErrSnapshot, in.trampSlot, m.TrampSlot)
	}
	if lim := in.host.MaxMemory(); lim != 0 && m.MemSize > lim {
		return fmt.Errorf("%w: the image's memory (%d bytes) exceeds the memory limit", ErrSnapshot, m.MemSize)
	}
	mem := in.main.Memory()
	cur := uint64(mem.Size())
	if cur > m.MemSize {
		return fmt.Errorf("%w: the image's memory (%d bytes) is smaller than a fresh one", ErrSnapshot, m.MemSize)
	}
	if _, ok := mem.Grow(uint32((m.MemSize - cur) / wasmPageSize)); !ok {
		return fmt.Errorf("%w: cannot grow the memory to %d bytes", ErrSnapshot, m.MemSize)
	}
	if err := in.memory.MapFile(img.file, imageAlign, int(m.MemSize)); err != nil {
		if !errors.Is(err, linmem.ErrNoMapping) {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		buf, _ := mem.Read(0, uint32(m.MemSize))
		if _, err := img.file.ReadAt(buf, imageAlign); err != nil {
			return fmt.Errorf("%w: read %s: %v", ErrSnapshot, img.file.Name(), err)
		}
	}
	sp, ok := in.main.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
	if !ok {
		return fmt.Errorf("%w: pyodide.asm.wasm does not export a mutable __stack_pointer", ErrSnapshot)
	}
	sp.Set(m.StackPtr)
	if m.ArityCache != 0 {
		in.setArityCache(m.ArityCache)
	}
	if err := in.host.Restore(m.Host); err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	in.runFn, in.takeFn, in.version, in.fastObj, in.restored = m.RunFn, m.TakeFn, m.Version, m.Fast, true
	in.timings.initialize = time.Since(t0)
	in.mu.Lock()
	in.recordMemorySize()
	in.mu.Unlock()
	return nil
}

// snapshot writes the boot image of this freshly booted interpreter, for
// later interpreters of this and other processes. A failure is reported
// on notice and costs nothing else: interpreters then boot.
func (in *Interpreter) snapshot(key string, notice io.Writer) {
	e := in.eng
	e.snap.mu.Lock()
	failed := e.snap.state(key).failed
	e.snap.mu.Unlock()
	if failed {
		return // reported the first time
	}
	err := in.captureSnapshot(key)
	e.snap.mu.Lock()
	defer e.snap.mu.Unlock()
	st := e.snap.state(key)
	if err != nil {
		fmt.Fprintf(notice, "rlm-sandbox: no boot snapshot: %v\n", err)
		st.failed = true
		return
	}
	st.tried = false // load it for the next interpreter
}

func (in *Interpreter) captureSnapshot(key string) error {
	e := in.eng
	if b, n := in.host.FS().Usage(); b != in.fsUsage[0] || int64(n) != in.fsUsage[1] {
		return fmt.Errorf("the boot changed the file system (%d bytes in %d nodes, was %d in %d)", b, n, in.fsUsage[0], in.fsUsage[1])
	}
	st, err := in.host.State()
	if err != nil {
		return err
	}
	sp, ok := in.main.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
	if !ok {
		return errors.New("pyodide.asm.wasm does not export a mutable __stack_pointer")
	}
	meta := snapshotMeta{Key: key, StackPtr: sp.Get(), RunFn: in.runFn, TakeFn: in.takeFn, ArityCache: in.arityCache,
		TrampSlot: in.trampSlot, Version: in.version, Fast: in.fastObj, Host: st}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := distCache(e.cacheDir).Lock(ctx, "snapshot-"+key[:32])
	if err != nil {
		return err
	}
	defer unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	mem, _ := in.main.Memory().Read(0, in.main.Memory().Size())
	return e.writeSnapshot(meta, mem)
}
