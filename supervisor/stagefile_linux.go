package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// newStageFile makes the staging file (see stageInFile), or returns nil
// when the kernel cannot: values then go in Stage frames.
func newStageFile() *os.File {
	fd, err := unix.MemfdCreate("rlm-stage", unix.MFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "rlm-stage")
}
