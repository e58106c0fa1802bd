package netlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	stateFile = "state.json"
	lockFile  = "state.lock"
)

// state is what a Net made, written to DIR/state.json before each thing is
// made (names) or right after (pids), so that Down can undo a run that
// crashed half way. Processes are recorded with their start time, so that a
// pid the kernel gave to another process since is never signalled.
type state struct {
	Tag    string `json:"tag"`
	Bridge string `json:"bridge"`
	Subnet string `json:"subnet"` // 10.213.7.0/24
	// Owner is the process that made the net; Sweep removes nets whose
	// owner is gone.
	Owner procID `json:"owner"`
	// OwnDir: the directory was made by New and goes with the net.
	OwnDir bool `json:"ownDir,omitempty"`
	// Firewall is the iptables rule (arguments after -I/-D) that lets
	// traffic cross the bridge where br_netfilter would filter it.
	Firewall []string  `json:"firewall,omitempty"`
	Hosts    []hostRec `json:"hosts"`
	Procs    []procRec `json:"procs"`
	// Dirs are directories outside DIR that the net made (PostgreSQL's
	// data, which must be reachable by the postgres user).
	Dirs []string `json:"dirs,omitempty"`
}

type hostRec struct {
	Name  string `json:"name"`
	Netns string `json:"netns"`
	Veth  string `json:"veth"`
	Addr  string `json:"addr"`
}

// procID names one incarnation of a process: its pid and its start time
// in clock ticks since boot (/proc/PID/stat field 22).
type procID struct {
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

// procRec is a process the net started, with what it takes to start it
// again (after a break, from another process: gridcity-fleet fix).
type procRec struct {
	Host string   `json:"host"` // "" for the root namespace
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	User string   `json:"user,omitempty"` // run as this user (setpriv)
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Log  string   `json:"log"`
	// Addr is what the process serves (host:port or a URL), for people.
	Addr       string     `json:"addr,omitempty"`
	StopSignal int        `json:"stopSignal,omitempty"`
	Ready      *readySpec `json:"ready,omitempty"`
	procID
	Stopped bool `json:"stopped,omitempty"` // stopped on purpose (Proc.Stop)
}

type readySpec struct {
	Engine string `json:"engine"`
	Target string `json:"target"`
}

func (r *procRec) key() string { return procKey(r.Host, r.Name) }

func procKey(host, name string) string {
	if host == "" {
		host = "root"
	}
	return host + "/" + name
}

// errNoState: the directory holds no net.
var errNoState = errors.New("no netlab state")

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", errNoState, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read netlab state: %w", err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("netlab state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

// writeState replaces the state file atomically: a crash leaves the old
// state or the new one, never half of one.
func writeState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write netlab state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write netlab state: %w", err)
	}
	return nil
}

// lockDir takes the directory's lock: every change to the state is a
// read-modify-write under it, whichever process makes it (the demo's up, a
// concurrent break or down).
func lockDir(dir string) (unlock func(), err error) {
	return lockPath(filepath.Join(dir, lockFile))
}

// lockPath takes an exclusive flock on the file at path, creating it.
func lockPath(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock netlab state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock netlab state %s: %w", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// self identifies this process.
func self() procID {
	id := procID{PID: os.Getpid()}
	id.Start, _ = startTime(id.PID)
	return id
}

// startTime reads a process's start time, in clock ticks since boot, and
// fails for a process that is gone or a zombie.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads the state and start time from a /proc/PID/stat line. The
// command name (field 2) may hold spaces and parentheses, so the fields are
// counted from the last ')'.
func parseStat(line string) (uint64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed /proc stat %q", line)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, errors.New("process has exited")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive: the process is the one recorded and has not exited.
func (id procID) alive() bool {
	if id.PID <= 0 {
		return false
	}
	st, err := startTime(id.PID)
	return err == nil && st == id.Start
}
