package exnref

import "fmt"

// tryInfo is what the analysis learns about one legacy try block.
type tryInfo struct {
	bt        blockType
	clauses   []clause
	delegate  bool // try ... delegate
	target    int  // delegate target: index into tries, or -1 for the caller
	delegated bool // some delegate targets this try

	dt int // emission: real label index of the block delegates branch to
}

// clause is one catch or catch_all clause of a try.
type clause struct {
	all   bool   // catch_all
	tag   uint32 // catch's tag
	ref   bool   // a rethrow in the clause's body targets this try
	label int    // emission: real label index of the clause's block
}

// frame is one open label of the input: a block, loop, if, try, try_table
// or the function body.
type frame struct {
	kind   opcode // opBlock, opLoop, opIf, opTry, opTryTable; 0 for the function
	try    int    // try frames: index into tries
	clause int    // try frames: current catch clause, -1 in the try body
	target int    // emission: real label index a branch to this label goes to
	local  uint32 // emission: exnref local of the current clause, if it is ref
}

// lowering translates one function body.
type lowering struct {
	m      *module
	body   []byte
	code   int // offset of the first instruction in body
	instrs []instr

	tries    []tryInfo
	toCaller bool // some delegate targets the caller

	// Emission state.
	types    *typeTable
	out      []byte
	frames   []frame
	h        int // number of open labels in the output
	callerDT int // real label index of the block caller delegates branch to
	exnBase  uint32
	exnDepth uint32 // exnref locals in use
	exnMax   uint32 // exnref locals needed
}

// newLowering decodes body and analyses its exception handling.
func newLowering(m *module, fn int) (*lowering, error) {
	body := m.bodies[fn]
	_, nLocals, code, err := localDecls(body)
	if err != nil {
		return nil, err
	}
	l := &lowering{m: m, body: body, code: code}
	l.exnBase = uint32(len(m.types[m.funcTypes[fn]].params)) + nLocals
	d := decoder{reader{b: body, pos: code}}
	for !d.done() {
		l.instrs = append(l.instrs, d.next())
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := l.analyse(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *lowering) fail(in instr, format string, args ...any) error {
	return fmt.Errorf("%w: %s (%v at offset %d)", ErrMalformed, fmt.Sprintf(format, args...), in.op, in.start)
}

// analyse checks the block structure, resolves the targets of delegate and
// rethrow, and records which tries and clauses need extra labels.
func (l *lowering) analyse() error {
	frames := []frame{{kind: 0}}
	labelOK := func(rel uint32) bool { return uint64(rel) < uint64(len(frames)) }
	for _, in := range l.instrs {
		if len(frames) == 0 {
			return l.fail(in, "instruction after the end of the function")
		}
		top := &frames[len(frames)-1]
		r := reader{b: l.body, pos: in.imm}
		switch in.op {
		case opBlock, opLoop, opIf:
			frames = append(frames, frame{kind: in.op})
		case opElse:
			if top.kind != opIf {
				return l.fail(in, "else outside if")
			}
		case opTry:
			bt, err := l.m.decodeBlockType(l.body[in.imm:in.end])
			if err != nil {
				return err
			}
			frames = append(frames, frame{kind: opTry, try: len(l.tries), clause: -1})
			l.tries = append(l.tries, tryInfo{bt: bt, target: -1, dt: -1})
		case opCatch, opCatchAll:
			if top.kind != opTry {
				return l.fail(in, "catch outside try")
			}
			t := &l.tries[top.try]
			if n := len(t.clauses); n > 0 && t.clauses[n-1].all {
				return l.fail(in, "catch after catch_all")
			}
			c := clause{all: in.op == opCatchAll}
			if !c.all {
				c.tag = r.u32()
				if uint64(c.tag) >= uint64(len(l.m.tagTypes)) {
					return l.fail(in, "tag index %d out of range", c.tag)
				}
			}
			t.clauses = append(t.clauses, c)
			top.clause = len(t.clauses) - 1
		case opDelegate:
			if top.kind != opTry || top.clause >= 0 {
				return l.fail(in, "delegate outside a try body")
			}
			t := &l.tries[top.try]
			t.delegate = true
			frames = frames[:len(frames)-1]
			rel := r.u32()
			if !labelOK(rel) {
				return l.fail(in, "label %d out of range", rel)
			}
			// The exception goes to the innermost try, at or outside the
			// label, that is still in its body; or to the caller.
			for j := len(frames) - 1 - int(rel); j > 0 && t.target < 0; j-- {
				switch f := frames[j]; {
				case f.kind == opTry && f.clause < 0:
					t.target = f.try
					l.tries[f.try].delegated = true
				case f.kind == opTryTable:
					return l.fail(in, "delegate to the handlers of a try_table is not supported")
				}
			}
			if t.target < 0 {
				l.toCaller = true
			}
		case opRethrow:
			rel := r.u32()
			if !labelOK(rel) {
				return l.fail(in, "label %d out of range", rel)
			}
			f := frames[len(frames)-1-int(rel)]
			if f.kind != opTry || f.clause < 0 {
				return l.fail(in, "rethrow label %d is not a catch", rel)
			}
			l.tries[f.try].clauses[f.clause].ref = true
		case opEnd:
			frames = frames[:len(frames)-1]
		case opBr, opBrIf, opBrOnNull, opBrOnNonNull:
			if rel := r.u32(); !labelOK(rel) {
				return l.fail(in, "label %d out of range", rel)
			}
		case opBrTable:
			for n := uint64(r.u32()) + 1; n > 0; n-- {
				if rel := r.u32(); !labelOK(rel) {
					return l.fail(in, "label %d out of range", rel)
				}
			}
		case opTryTable:
			tt, err := l.readTryTable(in)
			if err != nil {
				return err
			}
			for _, c := range tt.clauses {
				if !labelOK(c.label) {
					return l.fail(in, "label %d out of range", c.label)
				}
			}
			frames = append(frames, frame{kind: opTryTable})
		}
	}
	if len(frames) != 0 {
		return fmt.Errorf("%w: function body not closed", ErrMalformed)
	}
	return nil
}
