//go:build !linux

package ipc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Page is the interrupt page. It is only implemented on Linux; elsewhere
// NewPage and OpenPage fail with an error wrapping errors.ErrUnsupported,
// and the methods of a nil *Page do nothing.
type Page struct{}

var errPageUnsupported = fmt.Errorf("ipc: interrupt page on %s: %w", runtime.GOOS, errors.ErrUnsupported)

// NewPage fails with an error wrapping errors.ErrUnsupported.
func NewPage() (*Page, error) { return nil, errPageUnsupported }

// OpenPage fails with an error wrapping errors.ErrUnsupported.
func OpenPage(f *os.File) (*Page, error) { return nil, errPageUnsupported }

// File returns nil.
func (p *Page) File() *os.File { return nil }

// Store does nothing.
func (p *Page) Store(sig int32) {}

// Swap returns 0.
func (p *Page) Swap(v int32) int32 { return 0 }

// Load returns 0.
func (p *Page) Load() int32 { return 0 }

// MarkReturned does nothing.
func (p *Page) MarkReturned(id uint64) {}

// Returned returns 0.
func (p *Page) Returned() uint64 { return 0 }

// WaitInterrupt waits for ctx or d (d < 0: ctx alone) and returns false.
func (p *Page) WaitInterrupt(ctx context.Context, d time.Duration) bool {
	sleepFor(ctx, d)
	return false
}

// Close returns nil.
func (p *Page) Close() error { return nil }
