package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// managed is the Sandbox New returns: a backend (worker or direct) that
// Restart can replace.
type managed struct {
	cfg       Config
	mu        sync.RWMutex
	b         backend
	destroyed bool
}

func (m *managed) backend() backend {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.b
}

func (m *managed) Initialize(ctx context.Context, value any) error {
	return m.backend().Initialize(ctx, value)
}

func (m *managed) Execute(ctx context.Context, code string) (*CodeExecution, error) {
	ce, err := m.backend().Execute(ctx, code)
	return stoppedBeforeStart(code, ce, err)
}

// stoppedBeforeStart gives an execution stopped before its code started
// (ctx done while it waited for the sandbox) the CodeExecution that
// Execute documents for a stop: the code's, with nothing printed.
func stoppedBeforeStart(code string, ce *CodeExecution, err error) (*CodeExecution, error) {
	if ce == nil && (errors.Is(err, ErrCanceled) || errors.Is(err, ErrTimeout)) {
		ce = &CodeExecution{Code: code}
	}
	return ce, err
}

func (m *managed) GetVariable(ctx context.Context, name string) (any, bool, error) {
	return m.backend().GetVariable(ctx, name)
}

func (m *managed) SetVariable(ctx context.Context, name string, v any) error {
	if !pythonName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return m.backend().SetVariable(ctx, name, v)
}

func (m *managed) Cancel()    { m.backend().Cancel() }
func (m *managed) Info() Info { return m.backend().Info() }

func (m *managed) Destroy() error {
	m.mu.Lock()
	m.destroyed = true
	b := m.b
	m.mu.Unlock()
	return b.Destroy()
}

func (m *managed) Restart(ctx context.Context) error {
	m.mu.RLock()
	if m.destroyed {
		m.mu.RUnlock()
		return ErrDestroyed
	}
	m.mu.RUnlock()
	nb, err := start(ctx, m.cfg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.destroyed {
		m.mu.Unlock()
		nb.Destroy()
		return ErrDestroyed
	}
	old := m.b
	m.b = nb
	m.mu.Unlock()
	old.Destroy()
	m.cfg.Logger.Info("sandbox restarted", "worker", nb.Info().Worker)
	return nil
}

func (m *managed) ExecuteInteractive(ctx context.Context, code string) (*CodeExecution, error) {
	ce, err := m.backend().ExecuteInteractive(ctx, code)
	return stoppedBeforeStart(code, ce, err)
}

func (m *managed) IsComplete(ctx context.Context, source string) (bool, error) {
	return m.backend().IsComplete(ctx, source)
}

func (m *managed) Stats(ctx context.Context) (Stats, error) {
	return m.backend().Stats(ctx)
}

// usable reports whether the sandbox's interpreter can still run code.
func (m *managed) usable() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return !m.destroyed && m.b.healthy()
}
