package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gridcity/gridcity/lib/probe"
)

// ProcessOptions describe a process to run on a host (or in the root
// namespace, with Net.StartRoot).
type ProcessOptions struct {
	Name string   // unique on its host: "postgres", "agent", "app"
	Argv []string // the program (an absolute path, or one found in PATH) and its arguments
	// User runs the process as this user (by setpriv, which execs: the
	// recorded pid is the program's). Empty: root.
	User string
	Env  []string // added to this process's environment
	Dir  string   // working directory
	// Addr is what it serves (host:port or a URL), shown to people.
	Addr string
	// Ready, when set, is probed from the root namespace until it
	// answers; Start fails if it does not within ReadyTimeout (30 s).
	Ready        *probe.Spec
	ReadyTimeout time.Duration
	// StopSignal stops it cleanly (default SIGTERM; PostgreSQL's fast
	// shutdown is SIGINT). After 10 s it is killed.
	StopSignal syscall.Signal
}

// Proc is a process the net started. It can be stopped and started again,
// also from another process that opened the net.
type Proc struct {
	Host, Name string
	n          *Net
}

// child is a process this process started: it reaps it.
type child struct {
	id   procID
	done chan struct{}
}

// StartProcess starts a process inside the host; its output goes to
// DIR/logs/HOST-NAME.log.
func (h *Host) StartProcess(ctx context.Context, o ProcessOptions) (*Proc, error) {
	return h.n.startProcess(ctx, h, o)
}

// StartRoot starts a process in the root namespace (a coordinator), which
// Down stops like the hosts' processes.
func (n *Net) StartRoot(ctx context.Context, o ProcessOptions) (*Proc, error) {
	return n.startProcess(ctx, nil, o)
}

func (n *Net) startProcess(ctx context.Context, h *Host, o ProcessOptions) (*Proc, error) {
	if o.Name == "" || strings.ContainsAny(o.Name, "/ ") || len(o.Argv) == 0 {
		return nil, fmt.Errorf("process %q %q: give a name without '/' or spaces, and a program", o.Name, o.Argv)
	}
	rec := procRec{Name: o.Name, Argv: o.Argv, User: o.User, Env: o.Env, Dir: o.Dir, Addr: o.Addr, StopSignal: int(o.StopSignal)}
	if h != nil {
		rec.Host = h.Name
	}
	if rec.StopSignal == 0 {
		rec.StopSignal = int(syscall.SIGTERM)
	}
	if o.Ready != nil {
		rec.Ready = &readySpec{Engine: o.Ready.Engine, Target: o.Ready.Target}
	}
	logName := rec.Name + ".log"
	if rec.Host != "" {
		logName = rec.Host + "-" + logName
	}
	rec.Log = filepath.Join(n.Dir, "logs", logName)
	err := n.update(func(st *state) error {
		for _, r := range st.Procs {
			if r.key() == rec.key() {
				return fmt.Errorf("%s is already started; Proc.Start starts it again", rec.key())
			}
		}
		st.Procs = append(st.Procs, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p := &Proc{Host: rec.Host, Name: rec.Name, n: n}
	return p, p.start(ctx, o.ReadyTimeout)
}

// Proc returns a process the net started (host "" for the root
// namespace), or nil.
func (n *Net) Proc(host, name string) *Proc {
	st, err := readState(n.Dir)
	if err != nil {
		return nil
	}
	for _, r := range st.Procs {
		if r.Host == host && r.Name == name {
			return &Proc{Host: host, Name: name, n: n}
		}
	}
	return nil
}

// Procs lists the processes the net started, in start order.
func (n *Net) Procs() []*Proc {
	st, err := readState(n.Dir)
	if err != nil {
		return nil
	}
	ps := make([]*Proc, 0, len(st.Procs))
	for _, r := range st.Procs {
		ps = append(ps, &Proc{Host: r.Host, Name: r.Name, n: n})
	}
	return ps
}

func (p *Proc) rec() (procRec, error) {
	st, err := readState(p.n.Dir)
	if err != nil {
		return procRec{}, err
	}
	for _, r := range st.Procs {
		if r.Host == p.Host && r.Name == p.Name {
			return r, nil
		}
	}
	return procRec{}, fmt.Errorf("%s is not in the net's state", procKey(p.Host, p.Name))
}

func (p *Proc) String() string { return procKey(p.Host, p.Name) }

// Log is the file the process writes its output to.
func (p *Proc) Log() string {
	r, _ := p.rec()
	return r.Log
}

// Addr is what the process serves, as given when it was started.
func (p *Proc) Addr() string {
	r, _ := p.rec()
	return r.Addr
}

// PID is the process's pid, 0 when it does not run.
func (p *Proc) PID() int {
	r, err := p.rec()
	if err != nil || !r.alive() {
		return 0
	}
	return r.PID
}

// Running reports whether the process runs.
func (p *Proc) Running() bool { return p.PID() != 0 }

// Stopped reports whether the process was stopped on purpose (Stop) rather
// than having ended by itself.
func (p *Proc) Stopped() bool {
	r, err := p.rec()
	return err == nil && r.Stopped
}

// Tail returns the last lines of the process's log.
func (p *Proc) Tail(lines int) string {
	return tail(p.Log(), lines)
}

// Start starts the process again (after Stop, or after it ended) and waits
// until it is ready; a running process is left alone.
func (p *Proc) Start(ctx context.Context) error {
	if p.Running() {
		return nil
	}
	return p.start(ctx, 0)
}

func (p *Proc) start(ctx context.Context, readyTimeout time.Duration) error {
	r, err := p.rec()
	if err != nil {
		return err
	}
	argv := r.Argv
	if r.User != "" {
		argv = append([]string{"setpriv", "--reuid", r.User, "--regid", r.User, "--init-groups", "--"}, argv...)
	}
	if r.Host != "" {
		h := p.n.Host(r.Host)
		if h == nil {
			return fmt.Errorf("%s: no host %q on the net", p, r.Host)
		}
		// ip netns exec execs the program: the pid stays the program's.
		argv = append([]string{"ip", "netns", "exec", h.Netns}, argv...)
	}
	if err := os.MkdirAll(filepath.Dir(r.Log), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "---- %s: netlab starts %s\n", time.Now().Format(time.RFC3339), strings.Join(r.Argv, " "))
	// Not CommandContext: the process outlives the call that started it.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), r.Env...)
	// Its own session: a Ctrl-C meant for the demo's terminal reaches
	// the demo, which stops everything in order, not each process at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p, err)
	}
	id := procID{PID: cmd.Process.Pid}
	id.Start, err = startTime(id.PID)
	if err != nil {
		// Gone already; keep the pid for the reason below.
		id.Start = 0
	}
	c := &child{id: id, done: make(chan struct{})}
	go func() { cmd.Wait(); close(c.done) }()
	p.n.mu.Lock()
	p.n.children[p.String()] = c
	p.n.mu.Unlock()
	if err := p.n.update(func(st *state) error {
		for i := range st.Procs {
			if st.Procs[i].key() == p.String() {
				st.Procs[i].procID, st.Procs[i].Stopped = id, false
			}
		}
		return nil
	}); err != nil {
		cmd.Process.Kill()
		return err
	}
	if r.Ready == nil {
		return nil
	}
	if readyTimeout <= 0 {
		readyTimeout = 30 * time.Second
	}
	spec := probe.Spec{Engine: r.Ready.Engine, Target: r.Ready.Target, Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	var last probe.Result
	for {
		select {
		case <-c.done:
			return fmt.Errorf("%s exited while starting; the end of %s:\n%s", p, r.Log, tail(r.Log, 15))
		default:
		}
		if last = probe.Run(ctx, spec); last.OK {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer on %s within %s (%s); the end of %s:\n%s", p, r.Ready.Target, readyTimeout, last.Reason, r.Log, tail(r.Log, 15))
		}
		select {
		case <-ctx.Done():
		case <-c.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the process with its stop signal (SIGKILL after 10 s) and
// waits until it has exited.
func (p *Proc) Stop(ctx context.Context) error {
	r, err := p.rec()
	if err != nil {
		return err
	}
	if err := p.n.update(func(st *state) error {
		for i := range st.Procs {
			if st.Procs[i].key() == p.String() {
				st.Procs[i].Stopped = true
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if !r.alive() {
		return nil
	}
	p.n.mu.Lock()
	c := p.n.children[p.String()]
	p.n.mu.Unlock()
	var done <-chan struct{}
	if c != nil && c.id == r.procID {
		done = c.done
	}
	return stopProc(r.procID, syscall.Signal(r.StopSignal), done, 10*time.Second)
}

// Signal sends sig to the process, if it runs.
func (p *Proc) Signal(sig syscall.Signal) error {
	r, err := p.rec()
	if err != nil {
		return err
	}
	if !r.alive() {
		return fmt.Errorf("%s does not run", p)
	}
	return syscall.Kill(r.PID, sig)
}

// stopProc signals the process recorded as id, waits for it to exit (done,
// when this process is its parent; else by polling /proc), kills it after
// grace, and then kills what is left of its process group (it led its own
// session: whatever remains there was started by it).
func stopProc(id procID, sig syscall.Signal, done <-chan struct{}, grace time.Duration) error {
	if !id.alive() {
		return nil
	}
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	if err := syscall.Kill(id.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	exited := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			if done != nil {
				select {
				case <-done:
					return true
				default:
				}
			} else if !id.alive() {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !exited(grace) {
		if id.alive() {
			syscall.Kill(id.PID, syscall.SIGKILL)
		}
		if !exited(5 * time.Second) {
			return fmt.Errorf("pid %d did not exit after SIGKILL", id.PID)
		}
	}
	syscall.Kill(-id.PID, syscall.SIGKILL)
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
