package main

import (
	"bytes"
	"encoding/json"
)

// skim reads a JSON object streamed through it, a piece at a time, and
// keeps only its members "id" and "method" (each up to skimKeep bytes):
// a message longer than --max-message is not held, yet a request can
// still get its error and a bridge call's answer can still fail the call.
type skim struct {
	state  skimState
	depth  int  // nesting of the value being skipped
	inStr  bool // inside a string
	esc    bool // after a backslash in a string
	scalar bool // the value is a number, true, false or null

	key, val []byte // the member being read (up to skimKeep bytes each)
	keyLong  bool   // key went past skimKeep
	valLong  bool   // val went past skimKeep

	id, method []byte // the raw members, when present
	hasID      bool
	hasMethod  bool
	bad        bool // not a JSON object, or an id or method past skimKeep
}

type skimState uint8

const (
	skimStart   skimState = iota // before '{'
	skimKey                      // before a key or '}'
	skimInKey                    // in a key's string
	skimColon                    // before ':'
	skimValue                    // before a value
	skimInValue                  // in a value
	skimNext                     // before ',' or '}'
	skimDone                     // after the object's '}'
)

const skimKeep = 1 << 10

// write reads the next piece of the message.
func (s *skim) write(b []byte) {
	for i := 0; i < len(b) && !s.bad; i++ {
		if s.state == skimInValue && s.inStr && !s.esc && s.valLong {
			// Deep in a long string (a large value): only a quote or a
			// backslash matters.
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				j = len(b) - i
			}
			if k := bytes.IndexByte(b[i:i+j], '\\'); k >= 0 {
				j = k
			}
			if i += j; i == len(b) {
				return
			}
		}
		s.byte(b[i])
	}
}

func (s *skim) byte(c byte) {
	white := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	switch s.state {
	case skimStart:
		switch {
		case c == '{':
			s.state = skimKey
		case !white:
			s.bad = true
		}
	case skimKey:
		switch {
		case c == '"':
			s.state, s.key, s.keyLong = skimInKey, s.key[:0], false
		case c == '}':
			s.state = skimDone
		case !white:
			s.bad = true
		}
	case skimInKey:
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.state = skimColon
			return
		}
		if len(s.key) < skimKeep {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	case skimColon:
		switch {
		case c == ':':
			s.state = skimValue
		case !white:
			s.bad = true
		}
	case skimValue:
		if white {
			return
		}
		s.state, s.val, s.valLong = skimInValue, s.val[:0], false
		s.depth, s.inStr, s.esc, s.scalar = 0, false, false, false
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth = 1
		case '}', ']', ',', ':':
			s.bad = true
			return
		default:
			s.scalar = true
		}
		s.keep(c)
	case skimInValue:
		if s.scalar {
			if white || c == ',' || c == '}' {
				s.member()
				s.state = skimNext
				s.byte(c)
				return
			}
			s.keep(c)
			return
		}
		s.keep(c)
		switch {
		case s.inStr && s.esc:
			s.esc = false
		case s.inStr && c == '\\':
			s.esc = true
		case s.inStr && c == '"':
			s.inStr = false
		case s.inStr:
		case c == '"':
			s.inStr = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			s.depth--
		}
		if !s.inStr && s.depth == 0 {
			s.member()
			s.state = skimNext
		}
	case skimNext:
		switch {
		case c == ',':
			s.state = skimKey
		case c == '}':
			s.state = skimDone
		case !white:
			s.bad = true
		}
	case skimDone:
		if !white {
			s.bad = true
		}
	}
}

// keep appends c to the value being read while it is short enough to be
// an id or a method.
func (s *skim) keep(c byte) {
	if len(s.val) < skimKeep {
		s.val = append(s.val, c)
	} else {
		s.valLong = true
	}
}

// member ends a member's value.
func (s *skim) member() {
	if s.keyLong {
		return
	}
	var dst *[]byte
	switch string(s.key) {
	case "id":
		dst, s.hasID = &s.id, true
	case "method":
		dst, s.hasMethod = &s.method, true
	default:
		return
	}
	if s.valLong || !json.Valid(s.val) {
		s.bad = true
		return
	}
	*dst = bytes.Clone(s.val)
}

// message is what the skim found, once the message has ended: nil when
// it was not a whole JSON object with a valid id (and method, if any).
func (s *skim) message() *message {
	if s.bad || s.state != skimDone {
		return nil
	}
	m := &message{HasMethod: s.hasMethod}
	if s.hasID && string(s.id) != "null" {
		m.ID = s.id
	}
	if s.hasMethod && (s.method[0] != '"' || json.Unmarshal(s.method, &m.Method) != nil) {
		return nil // a method must be a string
	}
	return m
}
