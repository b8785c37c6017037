//go:build !unix

package linmem

import "github.com/tetratelabs/wazero/experimental"

const supported = false

func allocate(capacity, max uint64) experimental.LinearMemory { return nil }
