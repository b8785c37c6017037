package supervisor

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
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

// trimSlack is how many characters beyond tailMax the tail holds before
// the surplus is dropped: trimming costs a pass over the kept characters,
// so it is done once per trimSlack characters, not once per chunk.
const trimSlack = 256 << 10

func newCollector(max int, onLine func(string)) *outputCollector {
	c := &outputCollector{onLine: onLine, unlimited: max < 0}
	if max >= 0 {
		c.headMax = max / 2
		c.tailMax = max - c.headMax
	}
	return c
}

// Write adds p, which the caller may reuse once Write returns.
func (c *outputCollector) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.add(unsafe.String(&p[0], len(p)), false)
	}
	return len(p), nil
}

// WriteString adds s.
func (c *outputCollector) WriteString(s string) { c.add(s, true) }

// add adds s; owned says s is an immutable string, which lines may pass
// on to onLine as they are, rather than copies.
func (c *outputCollector) add(s string, owned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines(s, owned)
	if c.unlimited {
		c.head = append(c.head, s...)
		return
	}
	if c.headRunes < c.headMax {
		i, n := 0, 0
		for i < len(s) && c.headRunes+n < c.headMax {
			if s[i] < utf8.RuneSelf {
				i++
			} else {
				_, size := utf8.DecodeRuneInString(s[i:])
				i += size
			}
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
	c.tailRunes += runeCount(s)
	if c.tailRunes > c.tailMax+trimSlack {
		c.trim()
	}
}

// trim drops all but the last tailMax characters of tail, counting them
// from the end, so that its cost is that of the characters kept.
func (c *outputCollector) trim() {
	if c.tailRunes <= c.tailMax {
		return
	}
	i := len(c.tail)
	for range c.tailMax {
		_, size := utf8.DecodeLastRune(c.tail[:i])
		i -= size
	}
	c.tail = c.tail[:copy(c.tail, c.tail[i:])]
	c.dropped += c.tailRunes - c.tailMax
	c.tailRunes = c.tailMax
}

// runeCount is utf8.RuneCountInString, eight ASCII bytes at a time.
func runeCount(s string) int {
	n := 0
	for len(s) > 0 {
		for len(s) >= 8 && (uint64(s[0])|uint64(s[1])<<8|uint64(s[2])<<16|uint64(s[3])<<24|
			uint64(s[4])<<32|uint64(s[5])<<40|uint64(s[6])<<48|uint64(s[7])<<56)&0x8080808080808080 == 0 {
			n += 8
			s = s[8:]
		}
		if len(s) == 0 {
			break
		}
		if s[0] < utf8.RuneSelf {
			s = s[1:]
		} else {
			_, size := utf8.DecodeRuneInString(s)
			s = s[size:]
		}
		n++
	}
	return n
}

// lines hands the complete lines of s to onLine.
func (c *outputCollector) lines(s string, owned bool) {
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
		switch {
		case len(c.partial) > 0:
			c.partial = append(c.partial, s[:i]...)
			c.onLine(string(c.partial))
			c.partial = c.partial[:0]
		case owned:
			c.onLine(s[:i])
		default:
			c.onLine(strings.Clone(s[:i]))
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
