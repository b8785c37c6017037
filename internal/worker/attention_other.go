//go:build !unix

package worker

import "os"

// AttentionSignal is nil where signals cannot be sent: a Stats request
// sent while code runs is then answered when the code returns.
var AttentionSignal os.Signal
