package main

import (
	"errors"
	"io"
	"os"
)

// readExact reads r to its end into a slice of the length read, without
// the spare capacity io.ReadAll leaves (up to a quarter of a large text,
// and a copy of it all at each growth), so that fileText can make the
// string of its bytes. A regular file (standard input redirected from one)
// is read into one allocation of the size left to read, as os.ReadFile
// does; anything else, such as a pipe, into chunks joined once at the end.
//
// More than limit bytes is errTooLong, found without reading much past
// the limit: a sandbox could not hold them, and reading /dev/zero (or
// `yes |`) to its end would take all of this machine's memory.
func readExact(r io.Reader, limit int64) ([]byte, error) {
	f, ok := r.(*os.File)
	if !ok {
		return readChunks(r, nil, limit)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return readChunks(r, nil, limit)
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil || fi.Size() <= off {
		return readChunks(r, nil, limit)
	}
	if fi.Size()-off > limit {
		return nil, errTooLong
	}
	b := make([]byte, fi.Size()-off)
	n, err := io.ReadFull(f, b)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF): // the file shrank
		return b[:n], nil
	case err != nil:
		return nil, err
	}
	return readChunks(f, b, limit) // the file may have grown
}

// errTooLong is readExact's error for more than its limit.
var errTooLong = errors.New("too long")

// readChunks reads r to its end after first, in chunks of growing size,
// and joins them: the result's capacity is its length unless r had
// nothing after first. More than limit bytes in all is errTooLong.
func readChunks(r io.Reader, first []byte, limit int64) ([]byte, error) {
	var chunks [][]byte
	total := len(first)
	for size := 64 << 10; ; size = min(2*size, 16<<20) {
		buf := make([]byte, size)
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			chunks = append(chunks, buf[:n])
			total += n
		}
		if int64(total) > limit {
			return nil, errTooLong
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case len(chunks) == 0:
		return first, nil
	case first == nil && len(chunks) == 1 && len(chunks[0]) == cap(chunks[0]):
		return chunks[0], nil
	}
	out := append(make([]byte, 0, total), first...)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}

// readFile is os.ReadFile with readExact's limit.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readExact(f, limit)
}
