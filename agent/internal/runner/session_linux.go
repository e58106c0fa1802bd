package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sessionMembers returns the live processes whose session id is sid, read
// from /proc. Zombies are left out: they run nothing, cannot be signalled
// away, and go when their parent (or init) reaps them.
func sessionMembers(sid int) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // gone since the listing
		}
		if st.session == sid && st.state != 'Z' && st.state != 'X' {
			out = append(out, pid)
		}
	}
	return out, nil
}

// procStat is what the runner needs of /proc/PID/stat.
type procStat struct {
	state   byte
	session int
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat reads "pid (comm) state ppid pgrp session …". comm is the
// process's own choice (up to 15 bytes of any kind, spaces and parentheses
// included), so the fields after it are found after the last ')'.
func parseStat(b []byte) (procStat, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	// After comm: state(3) ppid(4) pgrp(5) session(6).
	f := bytes.Fields(b[end+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	sid, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return procStat{}, fmt.Errorf("stat: session %q: %w", f[3], err)
	}
	return procStat{state: f[0][0], session: sid}, nil
}

// sessionOf returns the session id of pid.
func sessionOf(pid int) (int, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.session, nil
}

// signalMember sends sig to pid if it is still in session sid. A pidfd
// pins the process while its session is checked, so a pid that ended and
// was reused by a stranger between the listing and the signal is not hit.
func signalMember(sid, pid int, sig syscall.Signal) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			// Before Linux 5.3: the small window stays.
			if s, err := sessionOf(pid); err == nil && s == sid {
				syscall.Kill(pid, sig)
			}
		}
		return // ESRCH: it is gone
	}
	defer unix.Close(fd)
	if s, err := sessionOf(pid); err != nil || s != sid {
		return
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
}
