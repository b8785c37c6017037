package supervisor

import (
	"fmt"
	"io"
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

// capText is s cut to max characters as output is (its first max/2 and
// last characters around a truncation notice), for an exception's message
// and traceback; cut reports whether it was. A negative max keeps s whole.
func capText(s string, max int) (_ string, cut bool) {
	if max < 0 || len(s) <= max {
		return s, false
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s, false
	}
	head := max / 2
	tail := max - head
	h := 0 // byte offset of the end of the head
	for range head {
		_, size := utf8.DecodeRuneInString(s[h:])
		h += size
	}
	t := len(s) // byte offset of the start of the tail
	for range tail {
		_, size := utf8.DecodeLastRuneInString(s[:t])
		t -= size
	}
	return s[:h] + truncationNotice(n-max) + s[t:], true
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
	onWrite   func(string) // Config.Stdout/Stderr, guarded (guardWriter)
}

// trimSlack is how many characters beyond tailMax the tail holds before
// the surplus is dropped: trimming costs a pass over the kept characters,
// so it is done once per trimSlack characters, not once per chunk.
const trimSlack = 256 << 10

func newCollector(max int, onLine, onWrite func(string)) *outputCollector {
	c := &outputCollector{onLine: onLine, onWrite: onWrite, unlimited: max < 0}
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
	if c.onWrite != nil {
		c.onWrite(s)
	}
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
			c.feed(s, owned, false)
			return
		}
		c.feed(s[:i], owned, true)
		s = s[i+1:]
	}
}

// feed adds s to the line being gathered and hands onLine each piece of
// maxLinePiece bytes it completes, cut before a character; end says s
// ends the line, whose rest then goes to onLine too. Each byte is copied
// at most once, however long the line.
func (c *outputCollector) feed(s string, owned, end bool) {
	for len(c.partial)+len(s) > maxLinePiece {
		// Cut the line, partial then s, before its byte maxLinePiece or
		// before the start of the character that byte is in.
		at := func(i int) byte {
			if i < len(c.partial) {
				return c.partial[i]
			}
			return s[i-len(c.partial)]
		}
		k := maxLinePiece
		for j := k; j > k-utf8.UTFMax; j-- {
			if utf8.RuneStart(at(j)) {
				k = j
				break
			}
		}
		if k <= len(c.partial) { // the character began in partial
			c.onLine(string(c.partial[:k]))
			c.partial = append(c.partial[:0], c.partial[k:]...) // < utf8.UTFMax bytes
			continue
		}
		n := k - len(c.partial)
		c.emit(s[:n], owned)
		s = s[n:]
	}
	if !end {
		c.partial = append(c.partial, s...)
		return
	}
	c.emit(s, owned)
}

// emit hands onLine what partial holds followed by s, and empties partial.
func (c *outputCollector) emit(s string, owned bool) {
	switch {
	case len(c.partial) > 0:
		c.partial = append(c.partial, s...)
		c.onLine(string(c.partial))
		c.partial = c.partial[:0]
	case owned:
		c.onLine(s)
	default:
		c.onLine(strings.Clone(s))
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

// guardWriter makes a Config.Stdout/Stderr writer a collector's onWrite:
// each chunk is written as it is, as a view of the chunk (an io.Writer
// keeps nothing of what it is given); a write that fails or panics ends
// the writes of the execution, and a panic is logged.
func guardWriter(log *slog.Logger, name string, w io.Writer) func(string) {
	if w == nil {
		return nil
	}
	broken := false // called one call at a time (the collector's lock, or its pump)
	return func(s string) {
		if broken || s == "" {
			return
		}
		defer func() {
			if p := recover(); p != nil {
				broken = true
				log.Error("output writer panicked; it gets no more output of this execution", "writer", name, "panic", fmt.Sprint(p))
			}
		}()
		if _, err := w.Write(unsafe.Slice(unsafe.StringData(s), len(s))); err != nil {
			broken = true
		}
	}
}
