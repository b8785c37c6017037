package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestCLIReadme runs the console examples of README.md's command-line
// section and of docs/serve.md from the repository's root, and checks
// that each prints what the document shows: exactly, except that a line
// holding a JSON object is compared as JSON, without the fields that vary
// from run to run (volatileFields).
func TestCLIReadme(t *testing.T) {
	cliBin(t)
	for _, doc := range []struct{ file, section string }{
		{"../README.md", "## The command line"},
		{"../docs/serve.md", ""},
	} {
		b, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if doc.section != "" {
			i := strings.Index(text, "\n"+doc.section+"\n")
			if i < 0 {
				t.Fatalf("%s has no section %q", doc.file, doc.section)
			}
			text = text[i+1:]
			if j := strings.Index(text[len(doc.section):], "\n## "); j >= 0 {
				text = text[:len(doc.section)+j]
			}
		}
		examples := consoleExamples(text)
		if len(examples) == 0 {
			t.Fatalf("%s: no console examples", doc.file)
		}
		for _, ex := range examples {
			t.Run(doc.file+": "+firstLine(ex.command), func(t *testing.T) {
				cmd := osexec.Command("sh", "-c", ex.command)
				cmd.Dir = ".."
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s\n%v; stderr:\n%s", ex.command, err, stderr.String())
				}
				if err := matchOutput(ex.output, string(out)); err != nil {
					t.Fatalf("%s\n%v\ngot:\n%s", ex.command, err, out)
				}
			})
		}
	}
}

// consoleExample is a "$ command" of a ```console block and the output
// shown after it.
type consoleExample struct {
	command string
	output  []string
}

// consoleExamples finds the examples of the ```console blocks of text. A
// command continues on the next line after a trailing "\" or "|".
func consoleExamples(text string) []consoleExample {
	var out []consoleExample
	in, cont := false, false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !in:
			in = strings.TrimSpace(line) == "```console"
		case strings.TrimSpace(line) == "```":
			in = false
		case cont:
			ex := &out[len(out)-1]
			ex.command += "\n" + line
			cont = strings.HasSuffix(line, "\\") || strings.HasSuffix(line, "|")
		case strings.HasPrefix(line, "$ "):
			out = append(out, consoleExample{command: line[2:]})
			cont = strings.HasSuffix(line, "\\") || strings.HasSuffix(line, "|")
		case len(out) > 0:
			out[len(out)-1].output = append(out[len(out)-1].output, line)
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// volatileFields are the JSON fields whose values differ from run to run.
var volatileFields = map[string]bool{
	"pid": true, "duration_ms": true, "python_duration_ms": true, "uptime_ms": true,
	"rss_bytes": true, "linear_memory_bytes": true, "rlm_sandbox": true,
	// The worker's lock-down depends on the kernel (what it lets be applied).
	"hardening": true, "hardening_refused": true,
}

// matchOutput compares output with the lines a document shows.
func matchOutput(want []string, got string) error {
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if got == "" {
		lines = nil
	}
	if len(lines) != len(want) {
		return fmt.Errorf("%d lines of output, the document shows %d", len(lines), len(want))
	}
	for i := range want {
		if err := matchLine(want[i], lines[i]); err != nil {
			return fmt.Errorf("line %d: %v", i+1, err)
		}
	}
	return nil
}

// matchLine compares one line: as JSON without the volatile fields when
// the document shows a JSON object, else exactly.
func matchLine(want, got string) error {
	if !strings.HasPrefix(want, "{") {
		if want != got {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}
	w, err := comparableJSON(want)
	if err != nil {
		return fmt.Errorf("the document's line is not JSON: %v", err)
	}
	g, err := comparableJSON(got)
	if err != nil {
		return fmt.Errorf("got %q, not JSON: %v", got, err)
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("got  %s\nwant %s", got, want)
	}
	return nil
}

// comparableJSON decodes s and drops the volatile fields, wherever they
// are nested.
func comparableJSON(s string) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if volatileFields[k] {
					delete(x, k)
				} else {
					strip(e)
				}
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	return v, nil
}
