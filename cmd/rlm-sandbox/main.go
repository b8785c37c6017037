// Command rlm-sandbox runs Python in an rlm-sandbox from the shell.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
