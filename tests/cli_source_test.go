package tests

import (
	"testing"
)

// TestCLIExecCodeFiles checks that code files are decoded as CPython reads
// a script: a UTF-8 byte order mark dropped, a PEP 263 coding declaration
// followed, and bytes that do not decode a SyntaxError before any code
// runs.
func TestCLIExecCodeFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string { return writeFile(t, dir, name, content) }
	const notUTF8 = "SyntaxError: Non-UTF-8 code starting with '\\xe9' in file "
	runCLICases(t, []cliCase{
		{name: "byte order mark", args: []string{"exec", file("bom.py", "\xef\xbb\xbfprint('bom')\n")}, out: "bom\n"},
		{name: "byte order mark on stdin", stdin: "\xef\xbb\xbfprint('bom')\n", args: []string{"exec"}, out: "bom\n"},
		{name: "latin-1 declared", args: []string{"exec", file("l1.py", "# -*- coding: latin-1 -*-\nprint(ascii('\xe9'))\n")}, out: "'\\xe9'\n"},
		{name: "iso-8859-1 declared on the second line", args: []string{"exec",
			file("l2.py", "#!/usr/bin/env python3\n# vim: set fileencoding=iso-8859-1 :\nprint(ascii('\xe9t\xe9'))\n")}, out: "'\\xe9t\\xe9'\n"},
		{name: "utf-8 declared", args: []string{"exec", file("u.py", "# coding: utf-8\nprint(ascii('\xc3\xa9'))\n")}, out: "'\\xe9'\n"},
		{name: "a declaration after code does not count", args: []string{"exec", file("late.py", "x = 1\n# coding: latin-1\nprint('\xe9')\n")},
			errHas: []string{notUTF8, "late.py on line 3"}, code: 1},
		{name: "invalid UTF-8", args: []string{"exec", "-c", "print('not run')", file("bad.py", "print(1)\n# caf\xe9\n")},
			errHas: []string{notUTF8, "bad.py on line 2"}, code: 1},
		{name: "invalid UTF-8 on stdin", stdin: "print('\xe9')\n", args: []string{"exec"},
			errHas: []string{notUTF8, "<stdin> on line 1"}, code: 1},
		{name: "invalid UTF-8, utf-8 declared", args: []string{"exec", file("badu.py", "# coding: utf-8\nprint('\xe9')\n")},
			errHas: []string{"SyntaxError: (unicode error) 'utf-8' codec can't decode byte 0xe9 on line 2"}, code: 1},
		{name: "byte order mark and latin-1", args: []string{"exec", file("bomlatin.py", "\xef\xbb\xbf# coding: latin-1\nprint(1)\n")},
			errHas: []string{"SyntaxError: encoding problem: latin-1 with BOM"}, code: 1},
		{name: "another coding", args: []string{"exec", file("cp.py", "# coding: cp1252\nprint('\x80')\n")},
			errHas: []string{"SyntaxError: encoding problem: cp1252", "UTF-8"}, code: 1},
		{name: "ascii declared", args: []string{"exec", file("a.py", "# coding: ascii\nprint('\xe9')\n")},
			errHas: []string{"SyntaxError: (unicode error) 'ascii' codec can't decode byte 0xe9 on line 2"}, code: 1},
	})
}
