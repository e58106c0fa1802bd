package netlab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Need is a program the net runs, and the Debian package that has it.
type Need struct {
	Program string
	Package string
	// find locates it; nil: PATH, then /usr/sbin and /sbin.
	find func() (string, error)
}

// The programs a net may need.
var (
	IP         = Need{Program: "ip", Package: "iproute2"}
	Setpriv    = Need{Program: "setpriv", Package: "util-linux"}
	Nginx      = Need{Program: "nginx", Package: "nginx"}
	Postgres   = Need{Program: "postgres", Package: "postgresql", find: findPostgres}
	Redis      = Need{Program: "redis-server", Package: "redis-server"}
	SSHD       = Need{Program: "sshd", Package: "openssh-server"}
	SSHKeygen  = Need{Program: "ssh-keygen", Package: "openssh-client"}
	everything = []Need{IP, Setpriv, Nginx, Postgres, Redis, SSHD, SSHKeygen}
)

// All lists every program the package can run, for CI's installer.
func All() []Need { return slices.Clone(everything) }

// Path finds the program.
func (nd Need) Path() (string, error) {
	if nd.find != nil {
		return nd.find()
	}
	if p, err := exec.LookPath(nd.Program); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		p := filepath.Join(d, nd.Program)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &MissingError{Needs: []Need{nd}}
}

// MissingError names the programs that are not installed and how to
// install them.
type MissingError struct{ Needs []Need }

func (e *MissingError) Error() string {
	var progs []string
	for _, n := range e.Needs {
		progs = append(progs, fmt.Sprintf("%s (Debian package %s)", n.Program, n.Package))
	}
	return fmt.Sprintf("not installed: %s; install with: %s", strings.Join(progs, ", "), InstallLine(e.Needs))
}

// Packages are the Debian packages of the needs, sorted, without
// duplicates.
func Packages(needs []Need) []string {
	var pkgs []string
	for _, n := range needs {
		pkgs = append(pkgs, n.Package)
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

// InstallLine is the apt-get command that installs the needs.
func InstallLine(needs []Need) string {
	return "apt-get install -y " + strings.Join(Packages(needs), " ")
}

// Missing returns the unmet needs.
func Missing(needs ...Need) []Need {
	var missing []Need
	for _, n := range needs {
		if _, err := n.Path(); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// Install installs Debian packages with apt-get, with a policy-rc.d that
// keeps their services from starting (the net starts its own), removed
// again afterwards.
func Install(ctx context.Context, pkgs []string, stdout, stderr io.Writer) error {
	if len(pkgs) == 0 {
		return nil
	}
	if err := NeedRoot(); err != nil {
		return err
	}
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\n# gridcity netlab: no service starts while it installs packages\nexit 101\n"), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", policy, err)
		}
		defer os.Remove(policy)
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Stdout, cmd.Stderr, cmd.Env = stdout, stderr, env
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
		return nil
	}
	if err := run("update"); err != nil {
		return err
	}
	return run(append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
}

// findPostgres finds the postgres server binary: beside initdb, which
// Debian keeps in /usr/lib/postgresql/VERSION/bin (the newest wins).
func findPostgres() (string, error) {
	initdb, err := findInitdb()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(p); err != nil {
		return "", &MissingError{Needs: []Need{{Program: "postgres", Package: "postgresql"}}}
	}
	return p, nil
}

func findInitdb() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, nil
		}
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		slices.SortFunc(m, func(a, b string) int {
			return versionCompare(filepath.Base(filepath.Dir(filepath.Dir(a))), filepath.Base(filepath.Dir(filepath.Dir(b))))
		})
		return m[len(m)-1], nil
	}
	return "", &MissingError{Needs: []Need{{Program: "postgres", Package: "postgresql"}}}
}

// versionCompare orders "9.6" < "15" < "16".
func versionCompare(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var x, y int
		fmt.Sscanf(pa[i], "%d", &x)
		fmt.Sscanf(pb[i], "%d", &y)
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}
