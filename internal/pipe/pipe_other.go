//go:build !linux

package pipe

import "os"

// Reader is the read end of a pipe: an os.Pipe here, read through the
// poller.
type Reader struct{ *os.File }

// New returns a pipe: the read end as a Reader, the write end as a file.
func New() (*Reader, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return &Reader{r}, w, nil
}
