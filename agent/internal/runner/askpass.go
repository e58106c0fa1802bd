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
//     run-as user) holding a unix socket, an askpass script and a sudo
//     wrapper. Neither script contains the password.
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
//  5. The agent accepts connections whose SO_PEERCRED uid is the run-as
//     user's, answers exactly one with the password, and removes the
//     directory when the command ends. One answer means one try: a wrong
//     password fails at once ("Sorry, try again", then "no password was
//     provided") instead of three tries that count towards a lockout, and a
//     command that needs sudo again in a new process relies on sudo's
//     credential cache (which covers the common `sudo a; sudo b`).
//
// Limits: the command itself runs as the run-as user, so it could connect
// first and read the password; that is the user whose password it is, and
// a human approved the command. A sudo called by absolute path
// (/usr/bin/sudo) or under a PATH the command resets gets no -A and fails
// for want of a terminal, as it would without gridcity.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	dir  string
	ln   *net.UnixListener
	sudo bool // a sudo wrapper is in dir
	done sync.WaitGroup
}

// startAskpass sets up the directory and starts answering on its socket.
func startAskpass(id runIdentity, agentPath string, password []byte) (*askpassServer, error) {
	if !filepath.IsAbs(agentPath) {
		return nil, fmt.Errorf("sudo askpass helper %q: the agent binary's path must be absolute", agentPath)
	}
	if _, err := os.Stat(agentPath); err != nil {
		return nil, fmt.Errorf("sudo askpass helper: %w", err)
	}
	base, err := execTempBase()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "gridcity-askpass-")
	if err != nil {
		return nil, fmt.Errorf("sudo askpass directory in %s: %w", base, err)
	}
	a := &askpassServer{dir: dir}
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
	a.done.Add(1)
	go a.serve(id.uid, password)
	ok = true
	return a, nil
}

// serve answers the first connection from uid with the password and
// closes the listener; connections from anyone else are dropped unanswered.
func (a *askpassServer) serve(uid uint32, password []byte) {
	defer a.done.Done()
	for {
		conn, err := a.ln.AcceptUnix()
		if err != nil {
			return // closed: the command ended
		}
		peer, err := peerUID(conn)
		if err != nil || peer != uid {
			conn.Close()
			continue
		}
		conn.SetWriteDeadline(time.Now().Add(askpassIO))
		conn.Write(password)
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
		return errors.New("askpass: the agent gave no password (it answers once per command, and only the command's user)")
	}
	if _, err := w.Write(append(pw, '\n')); err != nil {
		return fmt.Errorf("askpass: write the password for sudo: %w", err)
	}
	return nil
}

// execTempBase picks where the helper's directory goes: the scripts in it
// must be executable, and hardened hosts mount /tmp noexec.
func execTempBase() (string, error) {
	candidates := []string{os.TempDir(), "/run", "/var/tmp", "/dev/shm"}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.IsDir() && !noexec(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("sudo askpass: none of %s is a directory on a filesystem that allows executing files", strings.Join(candidates, ", "))
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
