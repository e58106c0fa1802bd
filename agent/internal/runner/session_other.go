//go:build unix && !linux

package runner

import (
	"errors"
	"syscall"
)

// sessionMembers cannot list a session without /proc; the runner then
// ends the command's process group only.
func sessionMembers(int) ([]int, error) {
	return nil, errors.New("listing a session's processes needs /proc (linux)")
}

func signalMember(_, pid int, sig syscall.Signal) { syscall.Kill(pid, sig) }
