package supervisor

import "context"

func newWorker(ctx context.Context, cfg Config) (Sandbox, error) {
	return nil, ErrWorkerUnavailable
}
