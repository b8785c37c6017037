//go:build !unix

package linmem

import (
	"os"

	"github.com/tetratelabs/wazero/experimental"
)

const supported = false

func allocate(capacity, max uint64) experimental.LinearMemory { return nil }

func probe(int) bool { return false }

type memory struct{}

func (*memory) mapFile(*os.File, int64, int) error { return ErrNoMapping }
