package procs

import (
	goruntime "runtime"
	"testing"
)

// One processor becomes two, and AtLeastTwo says so; more are left alone.
func TestAtLeastTwo(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	goruntime.GOMAXPROCS(1)
	if !AtLeastTwo() {
		t.Error("one processor: AtLeastTwo reported none added")
	}
	if n := goruntime.GOMAXPROCS(0); n != 2 {
		t.Errorf("one processor: GOMAXPROCS %d after, want 2", n)
	}
	goruntime.GOMAXPROCS(3)
	if AtLeastTwo() {
		t.Error("three processors: AtLeastTwo reported one added")
	}
	if n := goruntime.GOMAXPROCS(0); n != 3 {
		t.Errorf("three processors: GOMAXPROCS %d after, want 3 (unchanged)", n)
	}
}
