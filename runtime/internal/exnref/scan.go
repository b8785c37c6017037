package exnref

import (
	"fmt"
	"runtime"
	"sync"
)

// scanBody decodes every instruction of a function body and reports whether
// it uses legacy exception handling.
func scanBody(body []byte) (legacy bool, err error) {
	_, _, code, err := localDecls(body)
	if err != nil {
		return false, err
	}
	d := decoder{reader{b: body, pos: code}}
	for !d.done() {
		if in := d.next(); in.op.isLegacy() {
			legacy = true
		}
	}
	if d.err != nil {
		return false, d.err
	}
	if len(body) == code || body[len(body)-1] != byte(opEnd) {
		return false, fmt.Errorf("%w: body does not end with end", ErrMalformed)
	}
	return legacy, nil
}

// scanAll scans every function body of m, spreading the work over the
// available CPUs, and returns which bodies use legacy exception handling.
// On failure the error names the lowest failing function index.
func scanAll(m *module) ([]bool, error) {
	legacy := make([]bool, len(m.bodies))
	err := parallel(len(m.bodies), func(i int) error {
		l, err := scanBody(m.bodies[i])
		legacy[i] = l
		return err
	})
	if ie, ok := err.(*indexedError); ok {
		return nil, fmt.Errorf("function %d: %w", m.nFuncImports+uint32(ie.i), ie.err)
	}
	return legacy, nil
}

// indexedError is the error of the i-th item of a parallel loop.
type indexedError struct {
	i   int
	err error
}

func (e *indexedError) Error() string { return e.err.Error() }
func (e *indexedError) Unwrap() error { return e.err }

// parallel calls f(i) for i in [0, n) on up to GOMAXPROCS goroutines, in
// chunks of consecutive indices. It returns the error of the lowest failing
// index as an *indexedError, or nil.
func parallel(n int, f func(i int) error) error {
	const chunk = 64
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	var (
		mu    sync.Mutex
		next  int
		first *indexedError
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				lo := next
				next += chunk
				stop := first != nil && first.i < lo
				mu.Unlock()
				if lo >= n || stop {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					if err := f(i); err != nil {
						mu.Lock()
						if first == nil || i < first.i {
							first = &indexedError{i, err}
						}
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return nil
}
