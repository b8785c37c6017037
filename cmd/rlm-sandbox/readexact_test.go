package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

func TestReadExact(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: several chunks
	for _, n := range []int{0, 1, 64 << 10, 64<<10 + 1, len(data)} {
		for name, r := range map[string]io.Reader{
			"reader":     bytes.NewReader(data[:n]),
			"one byte":   iotest.OneByteReader(bytes.NewReader(data[:min(n, 70_000)])),
			"half reads": iotest.HalfReader(bytes.NewReader(data[:n])),
		} {
			want := data[:n]
			if name == "one byte" {
				want = data[:min(n, 70_000)]
			}
			got, err := readExact(r, int64(len(data)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s, %d bytes: got %d bytes (%v), want %d", name, n, len(got), err, len(want))
			}
			if len(got) > 0 && cap(got) != len(got) {
				t.Errorf("%s, %d bytes: capacity %d for length %d", name, n, cap(got), len(got))
			}
		}
	}

	// A regular file, read from where its offset is.
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := readExact(f, int64(len(data)))
	if err != nil || !bytes.Equal(got, data[5:]) || cap(got) != len(got) {
		t.Fatalf("file from offset 5: %d bytes, capacity %d (%v), want %d", len(got), cap(got), err, len(data)-5)
	}

	// A read error is returned, not taken for the end.
	boom := errors.New("boom")
	if _, err := readExact(io.MultiReader(bytes.NewReader(data[:100_000]), iotest.ErrReader(boom)), 1<<30); !errors.Is(err, boom) {
		t.Fatalf("read error: got %v, want %v", err, boom)
	}

	// Past the limit: errTooLong, from a file by its size, from a stream
	// (an endless one: /dev/zero) without reading it all.
	if _, err := readExact(bytes.NewReader(data), int64(len(data))-1); !errors.Is(err, errTooLong) {
		t.Fatalf("a reader one byte over the limit: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := readExact(f, 100); !errors.Is(err, errTooLong) {
		t.Fatalf("a file over the limit: %v", err)
	}
	if zero, err := os.Open("/dev/zero"); err == nil {
		defer zero.Close()
		if _, err := readExact(zero, 10<<20); !errors.Is(err, errTooLong) {
			t.Fatalf("/dev/zero: %v", err)
		}
	}
}
