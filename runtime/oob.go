package runtime

import (
	"context"
	"fmt"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/linmem"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// oobModule is a test module with a one-page memory and two exports that
// load an i32: "load" at the address it is given, "far" at that address
// plus the largest static offset (2^32-1), the farthest a wasm32 access
// reaches.
var oobModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type 0: (i32) -> i32
	0x03, 0x03, 0x02, 0x00, 0x00, // two functions of type 0
	0x05, 0x04, 0x01, 0x01, 0x01, 0x01, // memory: min 1, max 1 page
	0x07, 0x0e, 0x02, 0x04, 'l', 'o', 'a', 'd', 0x00, 0x00, 0x03, 'f', 'a', 'r', 0x00, 0x01,
	0x0a, 0x15, 0x02,
	0x07, 0x00, 0x20, 0x00, 0x28, 0x02, 0x00, 0x0b, // local.get 0; i32.load offset=0
	0x0b, 0x00, 0x20, 0x00, 0x28, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0b, // i32.load offset=2^32-1
}

// probeOutOfBounds runs oobModule's function fn at addr with the engine
// configuration and linear memory the guest gets in this process. With
// bounds checks, an access outside the memory returns wazero's trap error;
// without (DropBoundsChecks), it faults and the process dies.
func probeOutOfBounds(ctx context.Context, fn string, addr uint32) error {
	cfg, _ := guestConfig()
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer rt.Close(ctx)
	var mem linmem.Tracker
	if a := mem.Allocator(); a != nil {
		ctx = experimental.WithMemoryAllocator(ctx, a)
	}
	m, err := rt.Instantiate(ctx, oobModule)
	if err != nil {
		return fmt.Errorf("instantiate: %w", err)
	}
	_, err = m.ExportedFunction(fn).Call(ctx, uint64(addr))
	return err
}
