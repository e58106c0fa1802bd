//go:build unix

package runner

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// commandPath is the PATH of every command, whoever it runs as: the agent's
// own PATH must not decide what runs, and the sbin directories hold the
// status tools (nginx -t, sshd -T) a non-root user may call too.
const commandPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runIdentity is who a command runs as.
type runIdentity struct {
	name     string
	uid, gid uint32
	home     string
	// cred is nil when the command runs as the agent's own user.
	cred *syscall.Credential
}

// users is the user database, an interface so that the decisions of
// resolveRunAs can be tested without the host's /etc/passwd.
type users interface {
	Lookup(name string) (*user.User, error)
	LookupId(uid string) (*user.User, error)
	GroupIds(u *user.User) ([]string, error)
}

// osUsers reads the host's user database. In a static (cgo-less) build
// os/user reads /etc/passwd and /etc/group only, so a runAs user from LDAP
// or SSSD is not found: such a host needs a local user.
type osUsers struct{}

func (osUsers) Lookup(name string) (*user.User, error)  { return user.Lookup(name) }
func (osUsers) LookupId(uid string) (*user.User, error) { return user.LookupId(uid) }
func (osUsers) GroupIds(u *user.User) ([]string, error) { return u.GroupIds() }

// resolveRunAs decides who a command runs as. Only a root agent can switch
// users; any other agent runs commands as itself or refuses, since failing
// later in exec would say less.
func resolveRunAs(runAs string, euid int, db users) (runIdentity, error) {
	self, err := db.LookupId(strconv.Itoa(euid))
	if err != nil {
		// A uid without a passwd entry (a container's arbitrary uid) can
		// still run commands as itself.
		self = &user.User{Uid: strconv.Itoa(euid), Gid: strconv.Itoa(os.Getegid()), Username: "uid " + strconv.Itoa(euid), HomeDir: "/"}
	}
	target := self
	if runAs != "" {
		if target, err = db.Lookup(runAs); err != nil {
			return runIdentity{}, fmt.Errorf("run as %q: %w", runAs, err)
		}
	}
	id, err := identityOf(target)
	if err != nil {
		return runIdentity{}, err
	}
	if target.Uid == self.Uid {
		return id, nil
	}
	if euid != 0 {
		return runIdentity{}, fmt.Errorf("the agent runs as %s and cannot run commands as %s: run the agent as root or set runAs: %s", self.Username, target.Username, self.Username)
	}
	gids, err := db.GroupIds(target)
	if err != nil {
		return runIdentity{}, fmt.Errorf("run as %q: supplementary groups: %w", target.Username, err)
	}
	groups := make([]uint32, 0, len(gids))
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return runIdentity{}, fmt.Errorf("run as %q: group id %q: %w", target.Username, g, err)
		}
		groups = append(groups, uint32(n))
	}
	id.cred = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: groups}
	return id, nil
}

func identityOf(u *user.User) (runIdentity, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runIdentity{}, fmt.Errorf("run as %q: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runIdentity{}, fmt.Errorf("run as %q: gid %q: %w", u.Username, u.Gid, err)
	}
	return runIdentity{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
}

// env is the whole environment of a command: what a login would set, and
// nothing of the agent's own (which may hold its settings and tokens).
func (id runIdentity) env() []string {
	return []string{
		"HOME=" + id.home,
		"USER=" + id.name,
		"LOGNAME=" + id.name,
		"PATH=" + commandPath,
		"LANG=C.UTF-8",
	}
}

// dir is the working directory: the user's home when it exists (system
// users often have /nonexistent), else /.
func (id runIdentity) dir() string {
	if fi, err := os.Stat(id.home); err == nil && fi.IsDir() {
		return id.home
	}
	return "/"
}
