package distload

import (
	"os"
	"syscall"
	"time"
)

// accessTime is st's access time, when the platform reports one.
func accessTime(st os.FileInfo) (time.Time, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(sys.Atim.Sec), int64(sys.Atim.Nsec)), true
}
