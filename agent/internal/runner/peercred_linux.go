package runner

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peer is the process at the other end of an askpass connection.
type peer struct {
	uid     uint32
	pid     int
	session int
}

// peerOf returns the uid and pid the kernel recorded for the process at
// the other end of conn when it connected, and that process's session id.
//
// The session is read by pid, which a process that has since exited could
// have handed to another. Where the kernel offers a pidfd for the peer
// (SO_PEERPIDFD, Linux 6.5), the peer is checked to be still alive after
// the session was read, so the pid was still its own; on older kernels the
// window stays (the peer would have to exit and its pid be reused inside
// the command's session in between).
func peerOf(conn *net.UnixConn) (peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			if pfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
				pidfd = pfd
			}
		}
	}); err != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	p := peer{uid: cred.Uid, pid: int(cred.Pid), session: -1}
	if p.pid <= 0 {
		return p, errors.New("peer credentials: no pid (the peer is in another pid namespace)")
	}
	sid, err := unix.Getsid(p.pid)
	if err != nil {
		return p, fmt.Errorf("peer %d: session: %w", p.pid, err)
	}
	if pidfd >= 0 {
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
			return p, fmt.Errorf("peer %d: exited before its session could be told: %w", p.pid, err)
		}
	}
	p.session = sid
	return p, nil
}

// noexec reports whether dir's filesystem is mounted noexec.
func noexec(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return true // unknown: try the next candidate
	}
	return st.Flags&unix.ST_NOEXEC != 0
}
