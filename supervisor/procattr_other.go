//go:build !linux

package supervisor

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}
