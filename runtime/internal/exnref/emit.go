package exnref

// tryTable is a decoded try_table instruction of the input.
type tryTable struct {
	bt      []byte
	clauses []tableClause
}

type tableClause struct {
	kind  byte
	tag   uint32
	label uint32
}

func (l *lowering) readTryTable(in instr) (tryTable, error) {
	d := decoder{reader{b: l.body, pos: in.imm}}
	d.blockType()
	tt := tryTable{bt: l.body[in.imm:d.pos]}
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		c := tableClause{kind: d.byte()}
		if c.kind == catchTag || c.kind == catchTagRef {
			c.tag = d.u32()
		}
		c.label = d.u32()
		tt.clauses = append(tt.clauses, c)
	}
	return tt, d.err
}

// clauseType is the type of the block a clause's catch branches to: it
// takes the try's parameters (passed on to the try_table inside) and
// yields what the catch delivers.
func (l *lowering) clauseType(t *tryInfo, c clause) funcType {
	ft := funcType{params: t.bt.params}
	if !c.all {
		ft.results = l.m.types[l.m.tagTypes[c.tag]].params
	}
	if c.ref {
		ft.results = append(ft.results[:len(ft.results):len(ft.results)], exnRef)
	}
	return ft
}

// delegateType is the type of the block inside a delegate target that
// delegating try_tables branch to.
func delegateType(t *tryInfo) funcType {
	return funcType{params: t.bt.params, results: []string{exnRef}}
}

// blockTypes returns the function types the lowering's new blocks need.
func (l *lowering) blockTypes() []funcType {
	var fts []funcType
	for i := range l.tries {
		t := &l.tries[i]
		if !t.delegate {
			for _, c := range t.clauses {
				if ft := l.clauseType(t, c); needsIndex(ft) {
					fts = append(fts, ft)
				}
			}
		}
		if ft := delegateType(t); (t.delegate || t.delegated) && needsIndex(ft) {
			fts = append(fts, ft)
		}
	}
	return fts
}

// push opens a label in the output and returns its index.
func (l *lowering) push() int {
	l.h++
	return l.h - 1
}

// depth is the relative label index, at the current position of the
// output, of the output label with index target.
func (l *lowering) depth(target int) uint32 { return uint32(l.h - 1 - target) }

// relabel maps a label index of the input, at the current position, to the
// output's.
func (l *lowering) relabel(rel uint32) uint32 {
	return l.depth(l.frames[len(l.frames)-1-int(rel)].target)
}

func (l *lowering) op(op opcode, imm ...uint32) {
	l.out = append(l.out, byte(op))
	for _, v := range imm {
		l.out = appendU32(l.out, v)
	}
}

// block opens a block of type ft and returns its label index.
func (l *lowering) block(ft funcType) int {
	l.out = append(l.out, byte(opBlock))
	l.out = l.types.appendBlockType(l.out, ft)
	return l.push()
}

// end closes the innermost output label.
func (l *lowering) end() {
	l.op(opEnd)
	l.h--
}

// emit writes the translated body: the local declarations, with the exnref
// locals the rethrows need appended, then the code.
func (l *lowering) emit(types *typeTable) []byte {
	l.types = types
	l.out = make([]byte, 0, len(l.body)+len(l.body)/8+64)
	l.frames = []frame{{kind: 0, target: l.push()}}
	if l.toCaller {
		l.callerDT = l.block(funcType{results: []string{exnRef}})
	}
	nextTry := 0
	copied := l.code // body[copied:in.start] is still to be copied as is
	flush := func(in instr) {
		l.out = append(l.out, l.body[copied:in.start]...)
		copied = in.end
	}
	for _, in := range l.instrs {
		switch in.op {
		case opBlock, opLoop, opIf:
			l.frames = append(l.frames, frame{kind: in.op, target: l.push()})
		case opTryTable:
			l.emitTryTable(in, flush)
		case opBr, opBrIf, opBrOnNull, opBrOnNonNull:
			r := reader{b: l.body, pos: in.imm}
			if rel := r.u32(); l.relabel(rel) != rel {
				flush(in)
				l.op(in.op, l.relabel(rel))
			}
		case opBrTable:
			l.emitBrTable(in, flush)
		case opTry:
			flush(in)
			l.emitTry(nextTry)
			nextTry++
		case opCatch, opCatchAll:
			flush(in)
			l.emitCatch()
		case opDelegate:
			flush(in)
			f := l.frames[len(l.frames)-1]
			l.frames = l.frames[:len(l.frames)-1]
			l.emitDelegate(f)
		case opRethrow:
			flush(in)
			r := reader{b: l.body, pos: in.imm}
			f := l.frames[len(l.frames)-1-int(r.u32())]
			l.op(opLocalGet, f.local)
			l.op(opThrowRef)
		case opEnd:
			f := l.frames[len(l.frames)-1]
			l.frames = l.frames[:len(l.frames)-1]
			switch {
			case f.kind == opTry:
				flush(in)
				l.endTry(f)
			case f.kind == 0 && l.toCaller:
				// Delegates to the caller land here: rethrow outside every
				// handler of the function.
				flush(in)
				l.op(opReturn)
				l.end()
				l.op(opThrowRef)
				l.end()
			default:
				l.h--
			}
		}
	}
	l.out = append(l.out, l.body[copied:]...)
	return l.header()
}

// header returns the local declarations followed by the code in l.out.
func (l *lowering) header() []byte {
	if l.exnMax == 0 {
		return append(l.body[:l.code:l.code], l.out...)
	}
	r := reader{b: l.body}
	entries := r.u32()
	b := make([]byte, 0, l.code+8+len(l.out))
	b = appendU32(b, entries+1)
	b = append(b, l.body[r.pos:l.code]...)
	b = appendU32(b, l.exnMax)
	b = append(b, exnRef...)
	return append(b, l.out...)
}

func (l *lowering) emitBrTable(in instr, flush func(instr)) {
	r := reader{b: l.body, pos: in.imm}
	n := uint64(r.u32())
	changed := false
	for i := uint64(0); i <= n; i++ {
		if rel := r.u32(); l.relabel(rel) != rel {
			changed = true
		}
	}
	if !changed {
		return
	}
	flush(in)
	r.pos = in.imm
	l.op(opBrTable, r.u32())
	for i := uint64(0); i <= n; i++ {
		l.out = appendU32(l.out, l.relabel(r.u32()))
	}
}

// emitTryTable copies a try_table of the input, mapping its catch labels.
func (l *lowering) emitTryTable(in instr, flush func(instr)) {
	tt, _ := l.readTryTable(in) // analyse checked it
	changed := false
	for _, c := range tt.clauses {
		if l.relabel(c.label) != c.label {
			changed = true
		}
	}
	if changed {
		flush(in)
		l.op(opTryTable)
		l.out = append(l.out, tt.bt...)
		l.out = appendU32(l.out, uint32(len(tt.clauses)))
		for _, c := range tt.clauses {
			l.out = append(l.out, c.kind)
			if c.kind == catchTag || c.kind == catchTagRef {
				l.out = appendU32(l.out, c.tag)
			}
			l.out = appendU32(l.out, l.relabel(c.label))
		}
	}
	l.frames = append(l.frames, frame{kind: opTryTable, target: l.push()})
}

// emitTry opens the output constructs of the i-th try:
//
//	try bt ... end           block bt
//
//	try bt ... catch...      block bt                      ;; $outer
//	                           block (result t*_n exnref?) ;; one per clause
//	                           ...
//	                             try_table bt (catch $tag 0) ... (catch_all 0)
//
//	try bt ... delegate      block bt                      ;; $after
//	                           block (result exnref)
//	                             try_table bt (catch_all_ref 0)
//
// and, when delegates target this try, a block inside that they branch to.
// Every catch clause branches to the block right around its try_table, and
// no branch targets a try_table's own label: wazero's compiler (1.12) does
// not pop a handler it leaves any other way, so such exits would leave a
// stale handler that catches later exceptions.
func (l *lowering) emitTry(i int) {
	t := &l.tries[i]
	f := frame{kind: opTry, try: i, clause: -1}
	l.out = append(l.out, byte(opBlock))
	l.out = append(l.out, t.bt.raw...)
	f.target = l.push()
	switch {
	case t.delegate:
		l.block(delegateType(t))
		l.op(opTryTable)
		l.out = append(l.out, t.bt.raw...)
		l.out = append(l.out, 1, catchAllRef, 0)
		l.push()
	case len(t.clauses) > 0:
		for k := len(t.clauses) - 1; k >= 0; k-- {
			t.clauses[k].label = l.block(l.clauseType(t, t.clauses[k]))
		}
		l.op(opTryTable)
		l.out = append(l.out, t.bt.raw...)
		l.out = appendU32(l.out, uint32(len(t.clauses)))
		for k, c := range t.clauses {
			switch {
			case c.all && c.ref:
				l.out = append(l.out, catchAllRef)
			case c.all:
				l.out = append(l.out, catchAll)
			case c.ref:
				l.out = append(l.out, catchTagRef)
				l.out = appendU32(l.out, c.tag)
			default:
				l.out = append(l.out, catchTag)
				l.out = appendU32(l.out, c.tag)
			}
			l.out = appendU32(l.out, uint32(k)) // the k-th block around
		}
		l.push()
	}
	if t.delegated {
		t.dt = l.block(delegateType(t))
	}
	l.frames = append(l.frames, f)
}

// closeDelegateTarget ends the try body of a delegate target: the body's
// results leave the try; an exception delegated to it is thrown again, now
// inside the try's own handlers.
func (l *lowering) closeDelegateTarget(f frame) {
	if !l.tries[f.try].delegated {
		return
	}
	l.op(opBr, l.depth(f.target))
	l.end()
	l.op(opThrowRef)
}

// emitDelegate closes a try ... delegate: the exception caught by the
// try_table's catch_all_ref goes to the delegate target's block, or to the
// function's if it goes to the caller.
func (l *lowering) emitDelegate(f frame) {
	t := &l.tries[f.try]
	l.closeDelegateTarget(f)
	l.end()                       // try_table
	l.op(opBr, l.depth(f.target)) // results
	l.end()                       // block (result exnref)
	target := l.callerDT
	if t.target >= 0 {
		target = l.tries[t.target].dt
	}
	l.op(opBr, l.depth(target))
	l.end()
}

// emitCatch moves from the try body, or the previous clause, to the next
// clause: the clause's block ends and its body follows.
func (l *lowering) emitCatch() {
	f := &l.frames[len(l.frames)-1]
	t := &l.tries[f.try]
	if f.clause < 0 {
		l.closeDelegateTarget(*f)
		l.end() // try_table
	} else if t.clauses[f.clause].ref {
		l.exnDepth--
	}
	l.op(opBr, l.depth(f.target)) // to $outer, with the results
	l.end()                       // the clause's block
	f.clause++
	if t.clauses[f.clause].ref {
		f.local = l.exnBase + l.exnDepth
		l.exnDepth++
		l.exnMax = max(l.exnMax, l.exnDepth)
		l.op(opLocalSet, f.local)
	}
}

// endTry closes the output constructs of a try at its end.
func (l *lowering) endTry(f frame) {
	t := &l.tries[f.try]
	if f.clause < 0 {
		l.closeDelegateTarget(f)
	} else if t.clauses[f.clause].ref {
		l.exnDepth--
	}
	l.end()
}
