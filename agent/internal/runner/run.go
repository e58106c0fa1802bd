//go:build unix

package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Output bounds. A command may print gigabytes; the coordinator gets the
// first AuditBytes of each stream as it is read and then only the last
// TailBytes, so the wire and the agent's memory stay bounded. The journal
// keeps HeadBytes and TailBytes of each stream.
const (
	AuditBytes = 1 << 20
	TailBytes  = 24 << 10
	HeadBytes  = 8 << 10
	// ChunkBytes bounds the data of one Chunk.
	ChunkBytes = 32 << 10
)

// Timeout bounds, as the coordinator validates them.
const (
	MinTimeout = time.Second
	MaxTimeout = 600 * time.Second
)

// defaultKillGrace is how long the processes of a timed-out or canceled
// command get between SIGTERM and SIGKILL to clean up.
const defaultKillGrace = 3 * time.Second

// pipeGrace bounds the wait for the output pipes to close after the
// command's session is empty: a process that left the session (setsid)
// may hold them open for ever.
const pipeGrace = 2 * time.Second

// Spec is one approved command.
type Spec struct {
	ID      string
	Command string        // run with /bin/sh -c
	Timeout time.Duration // MinTimeout – MaxTimeout
	RunAs   string        // user name; "" = the agent's own user
	// Stdin is the declared secret input: written to stdin, which is then
	// closed, and masked in the output with its accidental forms (see
	// secretMasks; a value under MinMaskedSecret bytes is not). nil =
	// /dev/null.
	Stdin []byte
	// SudoPassword is handed to sudo through an askpass helper, never
	// through the command's stdin, and masked in the output.
	SudoPassword []byte
	// AskpassPath is the agent binary: sudo runs `AskpassPath askpass`,
	// whose body is Askpass. Needed when SudoPassword is set.
	AskpassPath string
	// OnStart, when set, is called with the process id once the command
	// has started and before any output is emitted (to journal it).
	OnStart func(pid int)
	// Log receives warnings about the run (a refused askpass peer); nil =
	// slog.Default(). Nothing logged holds a secret.
	Log *slog.Logger

	// killGrace overrides defaultKillGrace in tests.
	killGrace time.Duration
}

// Stream names one of a command's outputs. The values match the proto's
// CommandEvent.Stream.
type Stream int

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// Chunk is a piece of one stream, already masked. Offset is where Data
// starts in the (masked) stream; offsets jump past the bytes left out
// between the first AuditBytes and the tail.
type Chunk struct {
	Stream Stream
	Offset uint64
	Data   []byte
}

// Result is how a command ended.
type Result struct {
	ExitCode int // -1 when killed by a signal or never started
	TimedOut bool
	Canceled bool
	Duration time.Duration
	// Bytes each stream produced in all, counted after masking.
	StdoutTotal, StderrTotal uint64
	// The output kept for the journal, masked: the whole stream when it is
	// at most HeadBytes+TailBytes long, else its first HeadBytes followed
	// by its last TailBytes (Total-len(Kept) bytes left out between).
	StdoutKept, StderrKept []byte
	// Err says why the command could not start (user unknown, not
	// permitted, bad spec); it never contains a secret.
	Err error
}

// Run runs spec's command and waits for it. Output is passed to emit as it
// is read, one call at a time (never concurrently); emit must not block for
// long, since a blocked emit stalls the command once its pipe is full.
//
// The command runs in a new session, so in its own process group and with
// no controlling terminal (sudo cannot prompt on the agent's terminal). On
// timeout or when ctx ends every process of the session gets SIGTERM and,
// after a grace, SIGKILL (see endSession). When the shell exits by itself,
// whatever it left running in its session is ended the same way: a command
// never outlives its run, and a lasting process belongs in its own unit
// (systemd-run, systemctl). A process that starts a session of its own
// (setsid) is out of reach: see the package comment.
func Run(ctx context.Context, spec Spec, emit func(Chunk)) Result {
	if err := spec.validate(); err != nil {
		return Result{ExitCode: -1, Err: err}
	}
	if ctx.Err() != nil {
		// Canceled before it started: nothing ran.
		return Result{ExitCode: -1, Canceled: true}
	}
	id, err := resolveRunAs(spec.RunAs, os.Geteuid(), osUsers{})
	if err != nil {
		return Result{ExitCode: -1, Err: err}
	}
	env := id.env()
	masks := append(secretMasks(secretValue(spec.Stdin)), secretMasks(spec.SudoPassword)...)
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}

	var ap *askpassServer
	if len(spec.SudoPassword) > 0 {
		if ap, err = startAskpass(id, spec.ID, spec.AskpassPath, spec.SudoPassword, log); err != nil {
			return Result{ExitCode: -1, Err: err}
		}
		defer ap.close()
		env = ap.env(env)
	}

	var mu sync.Mutex
	serial := func(c Chunk) {
		mu.Lock()
		defer mu.Unlock()
		emit(c)
	}
	p := &process{spec: spec, grace: spec.killGrace, log: log}
	if p.grace <= 0 {
		p.grace = defaultKillGrace
	}
	if err := p.start(id, env); err != nil {
		return Result{ExitCode: -1, Err: err}
	}
	if ap != nil {
		// The shell leads the command's session (Setsid): only its
		// processes get the password.
		ap.answer(p.cmd.Process.Pid)
	}
	if spec.OnStart != nil {
		spec.OnStart(p.cmd.Process.Pid)
	}
	return p.wait(ctx, newStream(Stdout, newMasker(masks...), serial), newStream(Stderr, newMasker(masks...), serial))
}

func (s Spec) validate() error {
	switch {
	case s.Command == "":
		return fmt.Errorf("command %s: the command is empty", s.ID)
	case bytes.IndexByte([]byte(s.Command), 0) >= 0:
		return fmt.Errorf("command %s: the command contains a NUL byte", s.ID)
	case s.Timeout < MinTimeout || s.Timeout > MaxTimeout:
		return fmt.Errorf("command %s: timeout %s is outside %s–%s", s.ID, s.Timeout, MinTimeout, MaxTimeout)
	case len(s.SudoPassword) >= maxSudoPassword:
		return fmt.Errorf("command %s: the sudo password is longer than %d bytes", s.ID, maxSudoPassword-1)
	case len(s.SudoPassword) > 0 && bytes.ContainsAny(s.SudoPassword, "\n\x00"):
		// sudo reads the askpass helper's answer up to the first line break.
		return fmt.Errorf("command %s: the sudo password contains a line break or NUL byte, which sudo cannot take", s.ID)
	}
	return nil
}

// secretValue is the part of the declared input that is masked: the input
// without its trailing line break, which a prompt's reader strips too.
func secretValue(stdin []byte) []byte {
	v := bytes.TrimSuffix(stdin, []byte("\n"))
	return bytes.TrimSuffix(v, []byte("\r"))
}

// process is one started command and the pipes the agent holds to it.
type process struct {
	spec   Spec
	grace  time.Duration
	log    *slog.Logger
	cmd    *exec.Cmd
	stdout *os.File // read ends
	stderr *os.File
	stdin  *os.File // write end, nil without Stdin
	// started is taken right after the start, before OnStart, so that
	// neither the duration nor the timeout counts the journal's fsync.
	started time.Time
}

func (p *process) start(id runIdentity, env []string) error {
	cmd := exec.Command("/bin/sh", "-c", p.spec.Command)
	cmd.Env = env
	cmd.Dir = id.dir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: id.cred}

	// The pipes are the agent's own *os.File, so exec starts no copying
	// goroutines and Wait returns when the shell exits; the agent decides
	// itself how long to read after that.
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	var err error
	var outW, errW *os.File
	if p.stdout, outW, err = os.Pipe(); err != nil {
		return fmt.Errorf("command %s: stdout pipe: %w", p.spec.ID, err)
	}
	childEnds = append(childEnds, outW)
	if p.stderr, errW, err = os.Pipe(); err != nil {
		p.stdout.Close()
		return fmt.Errorf("command %s: stderr pipe: %w", p.spec.ID, err)
	}
	childEnds = append(childEnds, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	if p.spec.Stdin != nil {
		var inR *os.File
		if inR, p.stdin, err = os.Pipe(); err != nil {
			p.closeAll()
			return fmt.Errorf("command %s: stdin pipe: %w", p.spec.ID, err)
		}
		childEnds = append(childEnds, inR)
		cmd.Stdin = inR
	}
	if err := cmd.Start(); err != nil {
		p.closeAll()
		return fmt.Errorf("command %s: start /bin/sh as %s: %w", p.spec.ID, id.name, err)
	}
	p.cmd = cmd
	p.started = time.Now()
	return nil
}

func (p *process) closeAll() {
	for _, f := range []*os.File{p.stdout, p.stderr, p.stdin} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *process) wait(ctx context.Context, out, errs *stream) Result {
	var readers sync.WaitGroup
	var stdoutKept, stderrKept []byte
	readers.Add(2)
	go func() { defer readers.Done(); stdoutKept = pump(p.stdout, out) }()
	go func() { defer readers.Done(); stderrKept = pump(p.stderr, errs) }()
	if p.stdin != nil {
		go func() {
			// EPIPE when the command does not read its input is fine.
			p.stdin.Write(p.spec.Stdin)
			p.stdin.Close()
		}()
	}

	exited := make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(exited)
	}()
	sid := p.cmd.Process.Pid // Setsid made the shell its session's leader
	timer := time.NewTimer(p.spec.Timeout - time.Since(p.started))
	defer timer.Stop()

	var res Result
	select {
	case <-exited:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.Canceled = true
	}
	if res.TimedOut || res.Canceled {
		p.endSession(sid)
	}
	<-exited
	res.Duration = time.Since(p.started)
	res.ExitCode = p.cmd.ProcessState.ExitCode()
	// Whatever the shell left behind in its session goes with it.
	if sessionAlive(sid) {
		p.endSession(sid)
	}

	pumped := make(chan struct{})
	go func() { readers.Wait(); close(pumped) }()
	select {
	case <-pumped:
	case <-time.After(pipeGrace):
		// A process outside the session holds the pipes: stop reading; its
		// next write gets EPIPE.
		p.stdout.Close()
		p.stderr.Close()
		<-pumped
	}
	p.closeAll()
	res.StdoutTotal, res.StderrTotal = out.total, errs.total
	res.StdoutKept, res.StderrKept = stdoutKept, stderrKept
	return res
}

// endSession ends the command's session and says so if anything survived.
func (p *process) endSession(sid int) {
	if left := endSession(sid, p.grace); len(left) > 0 {
		p.log.Warn("processes of a command survived SIGKILL (stuck in the kernel?); they are left running",
			"command", p.spec.ID, "session", sid, "pids", fmt.Sprint(left))
	}
}

// pump reads one pipe to its end (or until it is closed under it) into s
// and returns what s kept.
func pump(r io.Reader, s *stream) []byte {
	buf := make([]byte, ChunkBytes)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.read(buf[:n])
		}
		if err != nil {
			break
		}
	}
	return s.finish()
}

// killRounds bounds the rounds of SIGKILL endSession sends after the
// grace (killTick apart): a process that forks as fast as it is killed, or
// one stuck in the kernel (state D), must not hold Run up for ever.
const (
	killRounds = 100
	killTick   = 20 * time.Millisecond
)

// endSession ends every process of the command's session sid: SIGTERM
// (and SIGCONT, so a stopped process can act on it) to each, and to any
// that appears meanwhile, then, once none is left or after grace, SIGKILL
// to each, repeated until none is left or killRounds have passed. It
// returns the processes still left then (none in practice).
//
// Members are found by their session id in /proc, so processes that moved
// to a process group of their own (coreutils timeout, a shell with job
// control, setpgid) are reached too. A session id is not reused while any
// process is in the session, so the scan never takes a stranger for a
// member. Without /proc (not Linux) only the process group sid, which
// Setsid made, is signalled. The session leader (the shell) counts until
// its Wait has reaped it, which the caller's goroutine does as soon as it
// exits.
func endSession(sid int, grace time.Duration) []int {
	signaled := map[int]bool{}
	term := func() (alive bool) {
		members, err := sessionMembers(sid)
		if err != nil {
			return groupAlive(sid)
		}
		for _, pid := range members {
			if !signaled[pid] {
				signaled[pid] = true
				signalMember(sid, pid, syscall.SIGTERM)
				signalMember(sid, pid, syscall.SIGCONT)
			}
		}
		return len(members) > 0
	}
	syscall.Kill(-sid, syscall.SIGTERM)
	syscall.Kill(-sid, syscall.SIGCONT)
	if !term() {
		return nil
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(killTick)
	defer tick.Stop()
wait:
	for {
		select {
		case <-deadline.C:
			break wait
		case <-tick.C:
			if !term() {
				return nil
			}
		}
	}
	for range killRounds {
		syscall.Kill(-sid, syscall.SIGKILL)
		members, err := sessionMembers(sid)
		if err != nil {
			if !groupAlive(sid) {
				return nil
			}
		} else if len(members) == 0 {
			return nil
		}
		for _, pid := range members {
			signalMember(sid, pid, syscall.SIGKILL)
		}
		<-tick.C
	}
	left, _ := sessionMembers(sid)
	return left
}

// sessionAlive reports whether any process is left in session sid.
func sessionAlive(sid int) bool {
	members, err := sessionMembers(sid)
	if err != nil {
		return groupAlive(sid)
	}
	return len(members) > 0
}

// groupAlive reports whether any process is left in the process group. A
// pgid is not reused while the group has members, so signalling it never
// reaches a stranger; once empty, the caller stops signalling.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
