//go:build !linux

package test

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
