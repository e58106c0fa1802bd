// Package runner runs approved commands, and nothing else: collectors run
// their fixed read-only queries through agent/internal/hostquery, so that
// only the command path (agent/internal/link and the agent's main) can
// reach this package. Those two are the only packages of the agent that
// import os/exec.
//
// # How far a command is contained
//
// An approved command's shell starts a new session (setsid). When the
// command times out, is canceled or its shell exits, every process whose
// session id (field 6 of /proc/PID/stat) is the shell's gets SIGTERM, then
// SIGKILL after a grace, until none is left (see endSession). That reaches
// processes that moved to a process group of their own: coreutils timeout,
// shells with job control, anything calling setpgid.
//
// It does not reach a process that calls setsid() itself (setsid(1),
// daemons that detach properly). Such a process outlives the command, and
// Run stops reading the output pipes it may hold after pipeGrace. A
// session is not a security boundary: a command that wants to leave
// running processes behind can. The real fix is a cgroup per command
// (systemd-run --scope, or cgroup v2's cgroup.kill), which no process can
// leave; that is future work. Without /proc (other than Linux) only the
// shell's process group is ended. (sudo runs its program in the command's
// session: approved commands have no terminal, so use_pty does not apply.)
//
// The same session is what the sudo askpass helper checks before it hands
// over the sudo password (see askpass.go).
package runner
