package linmem

import "testing"

func TestGrowKeepsAddressAndContents(t *testing.T) {
	a := Allocator()
	if a == nil {
		t.Skip("no reservation on this platform")
	}
	m := a.Allocate(0, 1<<30)
	defer m.Free()
	b := m.Reallocate(64 << 10)
	if len(b) != 64<<10 {
		t.Fatalf("len %d", len(b))
	}
	b[0], b[len(b)-1] = 1, 2
	c := m.Reallocate(100 << 20)
	if &c[0] != &b[0] || c[0] != 1 || c[64<<10-1] != 2 || len(c) != 100<<20 {
		t.Fatal("growing moved or lost the memory")
	}
	c[len(c)-1] = 3 // committed: must not fault
	if m.Reallocate(2<<30) != nil {
		t.Fatal("grew past the maximum")
	}
}
