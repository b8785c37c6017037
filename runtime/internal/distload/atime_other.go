//go:build !linux

package distload

import (
	"os"
	"time"
)

// accessTime is st's access time, when the platform reports one: here
// it does not, and only MarkUsed's marks count.
func accessTime(os.FileInfo) (time.Time, bool) { return time.Time{}, false }
