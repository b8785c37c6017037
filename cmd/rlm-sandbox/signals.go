package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interruptContext returns a context that the first SIGINT or SIGTERM
// cancels, with a *signalError as its cause: running code gets a
// KeyboardInterrupt and the command exits 130 (143 for SIGTERM) once it has
// cleaned up. A second signal has its default effect and ends the process
// at once (a worker dies with it: its parent-death signal is SIGKILL).
func interruptContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signalContext(parent, os.Interrupt, syscall.SIGTERM)
}

// signalContext returns a context that the first of the signals cancels,
// with a *signalError as its cause; a second signal has its default effect.
func signalContext(parent context.Context, signals ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, signals...)
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&signalError{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// interruption returns the signal error that cancelled ctx, or nil.
func interruption(ctx context.Context) error {
	var sig *signalError
	if errors.As(context.Cause(ctx), &sig) {
		return sig
	}
	return nil
}
