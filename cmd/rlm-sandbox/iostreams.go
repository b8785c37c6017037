package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// iostreams are the command's standard streams and whether each is a
// terminal, which decides prompts, progress displays and error hints.
type iostreams struct {
	In          io.Reader
	Out, ErrOut io.Writer

	inTTY, outTTY, errTTY bool
}

// systemStreams are the process's own streams.
func systemStreams() *iostreams {
	return &iostreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		inTTY: isTerminal(os.Stdin), outTTY: isTerminal(os.Stdout), errTTY: isTerminal(os.Stderr),
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}
