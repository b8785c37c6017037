//go:build !linux

package ipc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
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

// Close returns nil.
func (p *Page) Close() error { return nil }
