package vfs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// prog turns fuzz input into operation arguments; it yields zeros once the
// input is exhausted.
type prog struct {
	b []byte
	i int
}

func (p *prog) done() bool { return p.i >= len(p.b) }

func (p *prog) next() int {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return int(p.b[p.i-1])
}

var fuzzNames = []string{"a", "b", "c", "l", ".", "..", "dev", strings.Repeat("n", NameMax+1)}

func (p *prog) path() string {
	var b strings.Builder
	for n := 1 + p.next()%4; n > 0; n-- {
		b.WriteByte('/')
		b.WriteString(fuzzNames[p.next()%len(fuzzNames)])
	}
	if p.next()%6 == 0 {
		b.WriteByte('/')
	}
	return b.String()
}

func (p *prog) target() string {
	switch p.next() % 4 {
	case 0:
		return fuzzNames[p.next()%4]
	case 1:
		return "../" + fuzzNames[p.next()%4]
	case 2:
		return "l/" + fuzzNames[p.next()%4]
	}
	return p.path()
}

func (p *prog) flags() int {
	b := p.next()
	flags := b & O_ACCMODE
	for bit, flag := range []int{O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY, O_NOFOLLOW} {
		if b&(4<<bit) != 0 {
			flags |= flag
		}
	}
	if p.next()%8 == 0 {
		flags |= O_PATH
	}
	return flags
}

func (p *prog) data() []byte {
	n := p.next()
	if n > 200 {
		n = (n - 200) * 100 // occasionally large, to reach the quota
	}
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i + n)
	}
	return d
}

func (p *prog) offset() int64 {
	switch p.next() % 8 {
	case 0:
		return -1
	case 1:
		return MaxFileSize - 1
	case 2:
		return 1 << 62
	}
	return int64(p.next() * p.next())
}

func (p *prog) time() int64 {
	switch p.next() % 4 {
	case 0:
		return UtimeNow
	case 1:
		return UtimeOmit
	}
	return int64(p.next()) << 30
}

// dump describes every linked node, for comparing a tree with its restored
// snapshot.
func dump(fs *FS) string {
	var b strings.Builder
	var walk func(path string)
	walk = func(path string) {
		st, e := fs.Lstat(path)
		fmt.Fprintf(&b, "%s %v %+v", path, e, st)
		switch st.Mode & S_IFMT {
		case S_IFREG:
			d, e := fs.Open(path, O_RDONLY, 0)
			if e == ESUCCESS {
				buf := make([]byte, st.Size+1)
				n, _ := d.Read(buf)
				fmt.Fprintf(&b, " %x", buf[:n])
				d.Close()
			}
		case S_IFLNK:
			t, _ := fs.Readlink(path)
			fmt.Fprintf(&b, " -> %q", t)
		case S_IFDIR:
			b.WriteByte('\n')
			d, e := fs.Open(path, O_RDONLY, 0)
			if e != ESUCCESS {
				return
			}
			ents, _ := d.ReadDir()
			d.Close()
			for _, ent := range ents[2:] {
				walk(strings.TrimSuffix(path, "/") + "/" + ent.Name)
			}
			return
		}
		b.WriteByte('\n')
	}
	walk("/")
	return b.String()
}

// runProg interprets fuzz input as a sequence of FS operations and checks
// the FS's invariants after each.
func runProg(t *testing.T, input []byte) {
	fs, clk := newTestFS(t)
	fs.SetLimit(8 << 10)
	fs.SetNodeLimit(64)
	p := &prog{b: input}
	var files []*File
	file := func() *File {
		if len(files) == 0 {
			return nil
		}
		return files[p.next()%len(files)]
	}
	buf := make([]byte, 300)
	for step := 0; step < 400 && !p.done(); step++ {
		clk.advance()
		op := p.next() % 28
		desc := fmt.Sprint("op ", op)
		switch op {
		case 0:
			fs.Mkdir(p.path(), uint32(p.next()))
		case 1:
			fs.MkdirAll(p.path(), 0o755)
		case 2:
			fs.WriteFile(p.path(), p.data(), 0o644)
		case 3:
			fs.AddFile(p.path(), p.data(), p.next()%2 == 0)
		case 4:
			if len(files) < 8 {
				path, flags := p.path(), p.flags()
				desc = fmt.Sprintf("Open(%q, %#o)", path, flags)
				if f, e := fs.Open(path, flags, 0o644); e == ESUCCESS {
					files = append(files, f)
				} else if f != nil {
					t.Fatalf("%s: File with error %v", desc, e)
				}
			}
		case 5:
			if f := file(); f != nil {
				f.Read(buf[:p.next()])
			}
		case 6:
			if f := file(); f != nil {
				f.Write(p.data())
			}
		case 7:
			if f := file(); f != nil {
				f.Pread(buf[:p.next()], p.offset())
			}
		case 8:
			if f := file(); f != nil {
				f.Pwrite(p.data(), p.offset())
			}
		case 9:
			if f := file(); f != nil {
				f.Lseek(p.offset()-int64(p.next()), p.next()%4)
			}
		case 10:
			if f := file(); f != nil {
				f.Truncate(p.offset())
			}
		case 11:
			if f := file(); f != nil {
				f.ReadDir()
			}
		case 12:
			if f := file(); f != nil {
				f.SetDirPos(int64(p.next()%6) - 1)
			}
		case 13:
			if len(files) > 0 {
				i := p.next() % len(files)
				if e := files[i].Close(); e != ESUCCESS {
					t.Fatalf("Close: %v", e)
				}
				files = slices.Delete(files, i, i+1)
			}
		case 14:
			fs.Unlink(p.path())
		case 15:
			fs.Rmdir(p.path())
		case 16:
			old, new := p.path(), p.path()
			desc = fmt.Sprintf("Rename(%q, %q)", old, new)
			fs.Rename(old, new)
		case 17:
			fs.Symlink(p.target(), p.path())
		case 18:
			fs.Chmod(p.path(), uint32(p.next()<<4|p.next()))
		case 19:
			fs.Utimens(p.path(), p.time(), p.time(), p.next()%2 == 0)
		case 20:
			fs.Truncate(p.path(), p.offset())
		case 21:
			path := p.path()
			fs.Stat(path)
			fs.Lstat(path)
			fs.Readlink(path)
			fs.Access(path, p.next()%9)
			if rp, e := fs.RealPath(path); e == ESUCCESS {
				a, e1 := fs.Stat(path)
				b, e2 := fs.Stat(rp)
				if e1 != ESUCCESS || e2 != ESUCCESS || a.Ino != b.Ino {
					t.Fatalf("RealPath(%q) = %q: %v %v %d %d", path, rp, e1, e2, a.Ino, b.Ino)
				}
			}
		case 22:
			states := make([]FileState, len(files))
			for i, f := range files {
				states[i] = f.State()
				f.Close()
			}
			before := dump(fs)
			snap, err := fs.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			fs2, err := Restore(snap)
			if err != nil {
				t.Fatal(err)
			}
			if after := dump(fs2); after != before {
				t.Fatalf("snapshot changed the tree:\n%s\nvs\n%s", before, after)
			}
			fs = fs2
			fs.SetClock(clk.now)
			files = files[:0]
			for _, st := range states {
				if f, e := fs.Reopen(st); e == ESUCCESS {
					files = append(files, f)
				}
			}
		case 23:
			fs.SetReadOnly(p.path(), p.next()%2 == 0)
		case 24:
			fs.AddDevice(p.path(), NullDevice{}, 0o666)
		case 25:
			if f := file(); f != nil {
				f.SetFlags(p.next() << 8)
			}
		case 26:
			if f := file(); f != nil {
				f.Stat()
				f.RealPath()
				f.Chmod(uint32(p.next()))
				f.Utimens(p.time(), p.time())
				f.Device()
				f.DirPos()
			}
		case 27:
			fs.SetLimit(int64(p.next()+1) << 6) // never 0: unlimited would let MaxFileSize through
		}
		if err := checkInvariants(fs); err != nil {
			t.Fatalf("step %d, %s: %v", step, desc, err)
		}
	}
	for _, f := range files {
		f.Close()
	}
	if err := checkInvariants(fs); err != nil {
		t.Fatalf("after closing: %v", err)
	}
	if _, nodes := fs.Usage(); nodes > 64 {
		t.Fatalf("%d nodes over the limit", nodes)
	}
}

func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 4, 1, 0, 6, 6, 0, 200, 22})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 16; i++ {
		b := make([]byte, 64+rng.IntN(1024))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(runProg)
}

// TestRandomOps runs many random programs so plain "go test" exercises the
// fuzzer's interpreter beyond the seed corpus.
func TestRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 100
	if testing.Short() {
		n = 30
	}
	for i := 0; i < n; i++ {
		b := make([]byte, 256+rng.IntN(2048))
		for j := range b {
			// Bias towards small values so paths collide often.
			if rng.IntN(2) == 0 {
				b[j] = byte(rng.IntN(8))
			} else {
				b[j] = byte(rng.Uint32())
			}
		}
		runProg(t, b)
	}
}
