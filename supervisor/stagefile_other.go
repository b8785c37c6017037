//go:build !linux

package supervisor

import "os"

// newStageFile returns nil: without memfd, values go in Stage frames.
func newStageFile() *os.File { return nil }
