package supervisor

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// maxLinePiece bounds what one OnStdout/OnStderr call receives: a longer
// line arrives in pieces.
const maxLinePiece = 64 << 10

// truncationNotice is what replaces the middle of an output longer than
// MaxOutputLength.
func truncationNotice(omitted int) string {
	return fmt.Sprintf("\n[... %d characters omitted ...]\n", omitted)
}

// outputCollector gathers one stream of an execution in bounded memory: the
// first head and the last tail characters (all of it when max is
// negative), the count of the characters in between, and hands complete
// lines to onLine as they arrive.
type outputCollector struct {
	mu        sync.Mutex
	unlimited bool
	headMax   int
	tailMax   int
	head      []byte
	headRunes int
	tail      []byte // the characters after the head, of which the last tailMax are kept
	tailRunes int
	dropped   int // characters dropped from the front of tail
	partial   []byte
	onLine    func(string)
}

func newCollector(max int, onLine func(string)) *outputCollector {
	c := &outputCollector{onLine: onLine, unlimited: max < 0}
	if max >= 0 {
		c.headMax = max / 2
		c.tailMax = max - c.headMax
	}
	return c
}

func (c *outputCollector) Write(p []byte) (int, error) {
	c.WriteString(string(p))
	return len(p), nil
}

// WriteString adds s.
func (c *outputCollector) WriteString(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines(s)
	if c.unlimited {
		c.head = append(c.head, s...)
		return
	}
	if c.headRunes < c.headMax {
		i, n := 0, 0
		for i < len(s) && c.headRunes+n < c.headMax {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		c.head = append(c.head, s[:i]...)
		c.headRunes += n
		s = s[i:]
	}
	if s == "" {
		return
	}
	c.tail = append(c.tail, s...)
	c.tailRunes += utf8.RuneCountInString(s)
	if c.tailRunes > 2*c.tailMax+maxLinePiece {
		c.trim()
	}
}

// trim drops all but the last tailMax characters of tail.
func (c *outputCollector) trim() {
	extra := c.tailRunes - c.tailMax
	if extra <= 0 {
		return
	}
	i := 0
	for n := 0; n < extra; n++ {
		_, size := utf8.DecodeRune(c.tail[i:])
		i += size
	}
	c.tail = append(c.tail[:0:0], c.tail[i:]...)
	c.tailRunes -= extra
	c.dropped += extra
}

// lines hands the complete lines of s to onLine.
func (c *outputCollector) lines(s string) {
	if c.onLine == nil {
		return
	}
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			c.partial = append(c.partial, s...)
			for len(c.partial) >= maxLinePiece {
				n := maxLinePiece
				for n > 0 && !utf8.RuneStart(c.partial[n]) {
					n--
				}
				if n == 0 {
					n = maxLinePiece
				}
				c.onLine(string(c.partial[:n]))
				c.partial = append(c.partial[:0], c.partial[n:]...)
			}
			return
		}
		if len(c.partial) > 0 {
			c.partial = append(c.partial, s[:i]...)
			c.onLine(string(c.partial))
			c.partial = c.partial[:0]
		} else {
			c.onLine(s[:i])
		}
		s = s[i+1:]
	}
}

// String returns what was kept, with the notice in place of what was not,
// and flushes an unterminated last line to onLine.
func (c *outputCollector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.onLine != nil && len(c.partial) > 0 {
		c.onLine(string(c.partial))
		c.partial = c.partial[:0]
	}
	c.trim()
	if c.dropped == 0 {
		return string(c.head) + string(c.tail)
	}
	return string(c.head) + truncationNotice(c.dropped) + string(c.tail)
}

// truncated reports whether characters were dropped.
func (c *outputCollector) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped > 0 || c.tailRunes > c.tailMax && !c.unlimited
}

// guardLine wraps a line callback of the caller's so that a panic in it is
// logged, and ends its calls for the execution, instead of taking the
// supervisor down.
func guardLine(log *slog.Logger, name string, f func(string)) func(string) {
	if f == nil {
		return nil
	}
	var broken atomic.Bool
	return func(line string) {
		if broken.Load() {
			return
		}
		defer func() {
			if p := recover(); p != nil {
				broken.Store(true)
				log.Error("output callback panicked; it gets no more lines of this execution", "callback", name, "panic", fmt.Sprint(p))
			}
		}()
		f(line)
	}
}
