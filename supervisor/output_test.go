package supervisor

import (
	"reflect"
	"strings"
	"testing"
)

func TestOutputCollector(t *testing.T) {
	var lines []string
	c := newCollector(10, func(l string) { lines = append(lines, l) })
	c.WriteString("héllo ")
	c.WriteString("wörld\nsecond line\nthird")
	got := c.String()
	if !strings.HasPrefix(got, "héllo w") || !strings.Contains(got, "[output truncated: ") {
		t.Fatalf("kept %q", got)
	}
	if head := strings.SplitN(got, "\n", 2)[0]; !utf8Valid(head) {
		t.Fatalf("split a character: %q", head)
	}
	if want := []string{"héllo wörld", "second line", "third"}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	unlimited := newCollector(-1, nil)
	unlimited.WriteString(strings.Repeat("x", 1000))
	if unlimited.String() != strings.Repeat("x", 1000) {
		t.Fatal("unlimited collector dropped output")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
