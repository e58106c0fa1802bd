package defense

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// DefaultFail2banSocket is where fail2ban-server listens unless its
// configuration says otherwise.
const DefaultFail2banSocket = "/var/run/fail2ban/fail2ban.sock"

// Bounds on reading fail2ban's configuration for its socket.
const (
	maxFail2banConfBytes = 256 << 10
	maxFail2banConfFiles = 64
)

// ErrFail2banStopped is what Fail2banStopped wraps when fail2ban is
// installed but its server is not running.
var ErrFail2banStopped = errors.New("fail2ban is not running")

// Fail2banStopped tells, without running anything, whether fail2ban's
// server is down: its socket does not exist. fail2ban-client is a Python
// program that costs tens of milliseconds of CPU to start, so a host where
// fail2ban is installed but stopped should not pay that every collection
// to be told the same. fsys is the root file system; the socket is the
// `socket` option of fail2ban's [Definition], read as fail2ban-client does
// (fail2ban.conf, fail2ban.d/*.conf, fail2ban.local, fail2ban.d/*.local,
// under etc/fail2ban; the last one set wins). It returns nil when the
// socket exists or when that cannot be told (a permission error): the
// client is asked then, and says what it says.
func Fail2banStopped(fsys fs.FS) error {
	sock := Fail2banSocket(fsys, "etc/fail2ban")
	_, err := fs.Stat(fsys, strings.TrimPrefix(sock, "/"))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: its socket %s does not exist (start fail2ban.service, or leave it: the firewall's own rules are still read)", ErrFail2banStopped, sock)
	}
	return nil
}

// Fail2banSocket returns the socket fail2ban-client uses with the
// configuration under dir in fsys, or DefaultFail2banSocket.
func Fail2banSocket(fsys fs.FS, dir string) string {
	files := []string{path.Join(dir, "fail2ban.conf")}
	confs, locals := dropIns(fsys, path.Join(dir, "fail2ban.d"))
	files = append(files, confs...)
	files = append(files, path.Join(dir, "fail2ban.local"))
	files = append(files, locals...)
	sock := DefaultFail2banSocket
	for _, name := range files {
		if s, ok := fail2banSocketIn(fsys, name); ok {
			sock = s
		}
	}
	return sock
}

// dropIns lists dir's *.conf and *.local files, each sorted by name, at
// most maxFail2banConfFiles in all.
func dropIns(fsys fs.FS, dir string) (confs, locals []string) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries[:min(len(entries), maxFail2banConfFiles)] {
		if e.IsDir() {
			continue
		}
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".conf"):
			confs = append(confs, path.Join(dir, name))
		case strings.HasSuffix(name, ".local"):
			locals = append(locals, path.Join(dir, name))
		}
	}
	slices.Sort(confs)
	slices.Sort(locals)
	return confs, locals
}

// fail2banSocketIn reads the `socket` option of the [Definition] section of
// one INI file, as Python's configparser does for the plain cases: `key =
// value` or `key: value`, case-insensitive keys, # and ; comments (also
// inline, after a space). Only an
// absolute path is taken; anything else (an interpolation, a relative
// path) is left alone, and the default or an earlier file stands.
func fail2banSocketIn(fsys fs.FS, name string) (string, bool) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxFail2banConfBytes))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var (
		section string
		sock    string
		found   bool
	)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if end := strings.IndexByte(line, ']'); end > 0 {
				section = strings.TrimSpace(line[1:end])
			}
			continue
		}
		if section != "Definition" {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 || !strings.EqualFold(strings.TrimSpace(line[:i]), "socket") {
			continue
		}
		v := strings.TrimSpace(line[i+1:])
		// An inline comment (fail2ban's parser takes ";"; "#" is cut too:
		// no socket path has a space before one).
		if j := strings.IndexFunc(v, func(r rune) bool { return r == ';' || r == '#' }); j > 0 && (v[j-1] == ' ' || v[j-1] == '\t') {
			v = strings.TrimSpace(v[:j])
		}
		if strings.HasPrefix(v, "/") && len(v) < 4096 && !strings.ContainsAny(v, "%\x00") {
			sock, found = path.Clean(v), true
		}
	}
	return sock, found
}
