package supervisor

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// outputCollector gathers one stream of an execution: it keeps up to max
// bytes (negative: all), counts what it dropped, and hands complete lines to
// onLine as they arrive.
type outputCollector struct {
	mu      sync.Mutex
	max     int
	buf     strings.Builder
	dropped int
	partial strings.Builder
	onLine  func(string)
}

func newCollector(max int, onLine func(string)) *outputCollector {
	return &outputCollector{max: max, onLine: onLine}
}

func (c *outputCollector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(string(p))
	return len(p), nil
}

// WriteString is Write for strings.
func (c *outputCollector) WriteString(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(s)
}

func (c *outputCollector) add(s string) {
	if c.max < 0 || c.buf.Len()+len(s) <= c.max {
		c.buf.WriteString(s)
	} else {
		room := max(c.max-c.buf.Len(), 0)
		for room > 0 && !utf8.RuneStart(s[room]) {
			room-- // never split a character
		}
		c.buf.WriteString(s[:room])
		c.dropped += len(s) - room
		c.max = c.buf.Len() // keep refusing once full
	}
	if c.onLine == nil {
		return
	}
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			c.partial.WriteString(s)
			return
		}
		c.partial.WriteString(s[:i])
		line := c.partial.String()
		c.partial.Reset()
		c.onLine(line)
		s = s[i+1:]
	}
}

// String returns what was kept, followed by a notice when output was
// dropped, and flushes an unterminated last line to onLine.
func (c *outputCollector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.onLine != nil && c.partial.Len() > 0 {
		c.onLine(c.partial.String())
		c.partial.Reset()
	}
	if c.dropped == 0 {
		return c.buf.String()
	}
	return c.buf.String() + fmt.Sprintf("\n... [output truncated: %d more bytes omitted]\n", c.dropped)
}
