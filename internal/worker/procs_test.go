package worker

import (
	goruntime "runtime"
	"testing"
)

// A worker given one processor by Go (one CPU, or a cgroup or affinity of
// one) runs with two Ps and does not poll for requests; with more it keeps
// what Go chose and polls.
func TestAtLeastTwoProcs(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	goruntime.GOMAXPROCS(1)
	if spin := atLeastTwoProcs(); spin >= 0 {
		t.Errorf("one processor: idle spin %v, want none (negative)", spin)
	}
	if n := goruntime.GOMAXPROCS(0); n != 2 {
		t.Errorf("one processor: GOMAXPROCS %d after, want 2", n)
	}
	goruntime.GOMAXPROCS(3)
	if spin := atLeastTwoProcs(); spin != 0 {
		t.Errorf("three processors: idle spin %v, want the default (0)", spin)
	}
	if n := goruntime.GOMAXPROCS(0); n != 3 {
		t.Errorf("three processors: GOMAXPROCS %d after, want 3 (unchanged)", n)
	}
}
