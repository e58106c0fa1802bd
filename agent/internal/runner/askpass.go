//go:build unix

package runner

// How a command's sudo gets its password
//
// The password must reach sudo without ever being on disk, in an argv or in
// an environment (all readable by others: /proc/PID/cmdline, environ, a
// core dump), and without the command's stdin (which carries the declared
// secret, and which sudo -S would take over).
//
//  1. For each run, Run creates a fresh directory (0700, owned by the
//     run-as user, with a random name) holding a unix socket, an askpass
//     script and a sudo wrapper. Neither script contains the password.
//     A root agent puts it in a base directory of its own, root's and
//     0711 (/run/gridcity-agent/askpass, else gridcity-agent-askpass in
//     the first of $TMPDIR, /var/tmp, /dev/shm that allows executing
//     files), so other users cannot list the names to find the socket;
//     the run-as user can pass through to its own directory. An agent
//     that is not root (it runs commands as itself) uses a world-listable
//     temporary directory as the base, as does a root agent whose bases
//     are all taken by someone else (it logs a warning).
//  2. The command gets SUDO_ASKPASS=<dir>/askpass, GRIDCITY_ASKPASS_SOCKET=
//     <dir>/s, and <dir> first in its PATH.
//  3. sudo reads a password from a terminal only, unless given -A; an
//     approved command has no terminal (Run starts it in a new session), so
//     Debian 12's sudo 1.9.13 fails with "a terminal is required to read
//     the password" even with SUDO_ASKPASS set. The wrapper <dir>/sudo
//     therefore execs the real sudo with -A (but not together with -S,
//     which sudo refuses). A wrapper in PATH rather than a shell function
//     in the script reaches every sudo found through PATH: `timeout 30
//     sudo …`, `xargs sudo`, scripts the command runs.
//  4. sudo closes every descriptor above 2 and runs the askpass program as
//     the invoking (run-as) user with the caller's environment. The script
//     runs `<agent> askpass`, which calls Askpass: it connects to the
//     socket named by GRIDCITY_ASKPASS_SOCKET and prints what it reads.
//  5. The agent answers only a process that the kernel says (SO_PEERCRED)
//     runs as the run-as user and that is in the command's session (its
//     session id, read by the peer's pid, is the shell's pid: Run starts
//     the shell as a session leader). sudo runs the helper in the session
//     of whatever called it, so a sudo anywhere in the command's tree
//     qualifies, while another process of the same user (a cron job, a
//     login, a poller watching the temporary directory) does not: it is
//     refused, logged at warn level with its pid, and does not use up the
//     answer. The agent answers exactly one connection with the password
//     and removes the directory when the command ends. One answer means
//     one try: a wrong password fails at once ("Sorry, try again", then
//     "no password was provided") instead of three tries that count
//     towards a lockout, and a command that needs sudo again in a new
//     process relies on sudo's credential cache (which covers the common
//     `sudo a; sudo b`).
//
// Limits: the command itself runs as the run-as user, so it could connect
// first and read the password; that is the user whose password it is, and
// a human approved the command. A sudo called by absolute path
// (/usr/bin/sudo) or under a PATH the command resets gets no -A and fails
// for want of a terminal, as it would without gridcity; a sudo started in
// a session of its own (setsid sudo …) is refused the password. The pid a
// peer's session is read by is checked against a pidfd where the kernel
// has SO_PEERPIDFD (Linux 6.5); before that a peer that exits at once
// leaves a window in which its pid would have to be reused inside the
// command's session.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// askpassSocketEnv names the socket the askpass helper asks.
const askpassSocketEnv = "GRIDCITY_ASKPASS_SOCKET"

// maxSudoPassword bounds what the helper reads and prints.
const maxSudoPassword = 4 << 10

// askpassIO bounds each step of the exchange, so a stuck peer never holds
// a command (or the helper) up.
const askpassIO = 5 * time.Second

// maxSocketPath is the size of sockaddr_un's sun_path less its NUL.
const maxSocketPath = 107

type askpassServer struct {
	dir      string
	ln       *net.UnixListener
	sudo     bool // a sudo wrapper is in dir
	uid      uint32
	password []byte
	cmdID    string
	log      *slog.Logger
	done     sync.WaitGroup
}

// startAskpass sets up the directory and the socket; answer starts
// answering once the command's session is known.
func startAskpass(id runIdentity, cmdID, agentPath string, password []byte, log *slog.Logger) (*askpassServer, error) {
	if !filepath.IsAbs(agentPath) {
		return nil, fmt.Errorf("sudo askpass helper %q: the agent binary's path must be absolute", agentPath)
	}
	if _, err := os.Stat(agentPath); err != nil {
		return nil, fmt.Errorf("sudo askpass helper: %w", err)
	}
	base, err := askpassBase(os.Geteuid(), log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "gridcity-askpass-")
	if err != nil {
		return nil, fmt.Errorf("sudo askpass directory in %s: %w", base, err)
	}
	a := &askpassServer{dir: dir, uid: id.uid, password: password, cmdID: cmdID, log: log}
	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()
	sock := filepath.Join(dir, "s")
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("sudo askpass socket %s: the path is longer than %d bytes (set TMPDIR shorter)", sock, maxSocketPath)
	}
	if a.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"}); err != nil {
		return nil, fmt.Errorf("sudo askpass socket: %w", err)
	}
	files := []string{sock, dir}
	script := "#!/bin/sh\n# Written by gridcity-agent for one command: sudo's askpass helper.\nexec " + shellQuote(agentPath) + " askpass\n"
	if err := writeScript(filepath.Join(dir, "askpass"), script); err != nil {
		return nil, err
	}
	files = append(files, filepath.Join(dir, "askpass"))
	if real := findSudo(); real != "" {
		if err := writeScript(filepath.Join(dir, "sudo"), sudoWrapper(real)); err != nil {
			return nil, err
		}
		files = append(files, filepath.Join(dir, "sudo"))
		a.sudo = true
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		return nil, fmt.Errorf("sudo askpass socket %s: %w", sock, err)
	}
	if id.cred != nil {
		for _, f := range files {
			if err := os.Lchown(f, int(id.uid), int(id.gid)); err != nil {
				return nil, fmt.Errorf("sudo askpass: hand %s to %s: %w", f, id.name, err)
			}
		}
	}
	ok = true
	return a, nil
}

// answer starts answering for the command whose shell leads session sid.
// Connections made before are queued, then checked like any other.
func (a *askpassServer) answer(sid int) {
	a.done.Add(1)
	go a.serve(sid)
}

// serve answers the first connection from a process of the run-as user
// in session sid with the password and closes the listener; connections
// from anyone else are dropped unanswered and do not use up the answer.
func (a *askpassServer) serve(sid int) {
	defer a.done.Done()
	for {
		conn, err := a.ln.AcceptUnix()
		if err != nil {
			return // closed: the command ended
		}
		p, err := peerOf(conn)
		switch {
		case err != nil:
			a.log.Warn("sudo askpass: refused a connection whose peer cannot be told; the password was not sent",
				"command", a.cmdID, "peer_pid", p.pid, "peer_uid", p.uid, "err", err)
			conn.Close()
			continue
		case p.uid != a.uid:
			a.log.Warn("sudo askpass: refused a connection from another user; the password was not sent",
				"command", a.cmdID, "peer_pid", p.pid, "peer_uid", p.uid)
			conn.Close()
			continue
		case p.session != sid:
			a.log.Warn("sudo askpass: refused a connection from a process outside the command's session; the password was not sent",
				"command", a.cmdID, "peer_pid", p.pid, "peer_uid", p.uid, "peer_session", p.session, "command_session", sid)
			conn.Close()
			continue
		}
		conn.SetWriteDeadline(time.Now().Add(askpassIO))
		conn.Write(a.password)
		conn.Close()
		a.ln.Close()
		return
	}
}

// env returns the command's environment with the helper in it.
func (a *askpassServer) env(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if a.sudo && strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + a.dir + ":" + strings.TrimPrefix(kv, "PATH=")
		}
		out = append(out, kv)
	}
	return append(out,
		"SUDO_ASKPASS="+filepath.Join(a.dir, "askpass"),
		askpassSocketEnv+"="+filepath.Join(a.dir, "s"))
}

// close stops answering and removes the directory.
func (a *askpassServer) close() {
	if a.ln != nil {
		a.ln.Close()
		a.done.Wait()
	}
	os.RemoveAll(a.dir)
}

// Askpass is the body of `gridcity-agent askpass`, the program sudo runs
// (through SUDO_ASKPASS) inside an approved command: it fetches the sudo
// password from the agent and prints it to stdout with a line break, as
// sudo expects. It prints nothing on failure; sudo then reports that no
// password was provided.
func Askpass() error {
	return askpass(os.Getenv(askpassSocketEnv), os.Stdout)
}

func askpass(sock string, w io.Writer) error {
	if sock == "" {
		return fmt.Errorf("askpass: %s is not set: this helper only answers sudo inside a command the agent runs", askpassSocketEnv)
	}
	conn, err := net.DialTimeout("unix", sock, askpassIO)
	if err != nil {
		return fmt.Errorf("askpass: connect to %s (the agent answers once per command): %w", sock, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(askpassIO))
	pw, err := io.ReadAll(io.LimitReader(conn, maxSudoPassword))
	if err != nil {
		return fmt.Errorf("askpass: read from %s: %w", sock, err)
	}
	if len(pw) == 0 {
		return errors.New("askpass: the agent gave no password (it answers once per command, and only the command's own processes)")
	}
	if _, err := w.Write(append(pw, '\n')); err != nil {
		return fmt.Errorf("askpass: write the password for sudo: %w", err)
	}
	return nil
}

// askpassBaseName is the root agent's base directory in each candidate
// but /run, where it is /run/gridcity-agent/askpass.
const askpassBaseName = "gridcity-agent-askpass"

// askpassBase picks where the per-command directories go. The scripts in
// them must be executable, and hardened hosts mount /tmp noexec. A root
// agent uses a base of its own, root's and 0711, so that other users cannot
// list the directories' names (see the package comment above); elsewhere,
// or when no such base can be had, a temporary directory itself.
func askpassBase(euid int, log *slog.Logger) (string, error) {
	candidates := execCandidates(os.TempDir(), "/run", "/var/tmp", "/dev/shm")
	if len(candidates) == 0 {
		return "", fmt.Errorf("sudo askpass: none of %s, /run, /var/tmp, /dev/shm is a directory on a filesystem that allows executing files", os.TempDir())
	}
	if euid != 0 {
		return candidates[0], nil
	}
	var problems []string
	for _, c := range execCandidates("/run", os.TempDir(), "/var/tmp", "/dev/shm") {
		names := []string{askpassBaseName}
		if c == "/run" {
			names = []string{"gridcity-agent", "askpass"}
		}
		dir, err := privateBase(c, names...)
		if err == nil {
			return dir, nil
		}
		problems = append(problems, err.Error())
	}
	log.Warn("sudo askpass: no private base directory could be had; the per-command directory goes in a world-listable one",
		"base", candidates[0], "problems", strings.Join(problems, "; "))
	return candidates[0], nil
}

// execCandidates returns those of dirs that exist on a filesystem that
// allows executing files, in order.
func execCandidates(dirs ...string) []string {
	var out []string
	for _, c := range dirs {
		if fi, err := os.Stat(c); err == nil && fi.IsDir() && !noexec(c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// privateBase makes root/names… a chain of directories owned by root that
// no one else can write, the last of mode 0711, and returns its path. root
// is a candidate base (/run, /tmp: root's, and sticky if others may write
// it, so no one can move away what root made in it). An existing directory
// is accepted only if it is root's and not writable by others: in /tmp
// someone else may have taken the name first (as a directory or a symlink).
func privateBase(root string, names ...string) (string, error) {
	dir := root
	for i, name := range names {
		dir = filepath.Join(dir, name)
		last := i == len(names)-1
		made := true
		if err := os.Mkdir(dir, 0o711); errors.Is(err, fs.ErrExist) {
			made = false
		} else if err != nil {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		switch {
		case !fi.IsDir():
			return "", fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
		case !ok || st.Uid != 0:
			return "", fmt.Errorf("%s is not root's", dir)
		case perm&0o022 != 0:
			return "", fmt.Errorf("%s is writable by others (%s)", dir, perm)
		case !made && !last && perm&0o001 == 0:
			return "", fmt.Errorf("%s cannot be passed through by others (%s)", dir, perm)
		}
		// The umask may have narrowed a new directory's mode.
		if (made || last) && perm != 0o711 {
			if err := os.Chmod(dir, 0o711); err != nil {
				return "", fmt.Errorf("%s: %w", dir, err)
			}
		}
	}
	return dir, nil
}

func writeScript(path, body string) error {
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		return fmt.Errorf("sudo askpass: write %s: %w", path, err)
	}
	return nil
}

// findSudo returns the sudo the command's PATH would find, or "".
func findSudo() string {
	for _, d := range filepath.SplitList(commandPath) {
		p := filepath.Join(d, "sudo")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// sudoWrapper is the script that adds -A to a sudo invocation: it scans
// the options before the command for -S (sudo refuses -A with -S; a user
// who asks for -S meant to feed stdin).
func sudoWrapper(real string) string {
	q := shellQuote(real)
	return `#!/bin/sh
# Written by gridcity-agent for one command: sudo reads a password from a
# terminal only unless given -A, and approved commands have no terminal.
for a do
	case $a in
	--) break ;;
	-S|--stdin) exec ` + q + ` "$@" ;;
	--*) ;;
	-*S*) exec ` + q + ` "$@" ;;
	-*) ;;
	*) break ;;
	esac
done
exec ` + q + ` -A "$@"
`
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
