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

func (*memory) word(uint32) *uint32 { return nil }

// Reallocate and Free make memory a LinearMemory; none is ever made here.
func (*memory) Reallocate(uint64) []byte { return nil }

func (*memory) Free() {}
