//go:build rlmescape && linux

package harden

import "os"

// In a test build (tag rlmescape), $RLM_ESCAPE_NO_SECCOMP=1 leaves seccomp
// out, so that tests/escape_test.go can check what Landlock stops alone.
func init() { skipSeccomp = os.Getenv("RLM_ESCAPE_NO_SECCOMP") == "1" }
