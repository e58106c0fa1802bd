package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gridcity/gridcity/lib/probe"
)

// PostgresOptions configure StartPostgres.
type PostgresOptions struct {
	Port int // default 5432
	// Password, when set, is the postgres role's password and the net's
	// clients must give it (scram-sha-256); empty: they are trusted.
	Password string
}

// StartPostgres initialises a cluster (initdb, as the postgres user) and
// runs it on the host's address. Its data lives in a directory of its own
// under os.TempDir(), readable by the postgres user whatever the net's
// directory is, and goes with the net.
func (h *Host) StartPostgres(ctx context.Context, o PostgresOptions) (*Proc, error) {
	if o.Port == 0 {
		o.Port = 5432
	}
	initdb, err := findInitdb()
	if err != nil {
		return nil, err
	}
	postgres, err := Postgres.Path()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres user to run PostgreSQL as (the postgresql package makes it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", Prefix+h.n.Tag+"-"+h.Name+"-pg-")
	if err != nil {
		return nil, err
	}
	if err := h.n.update(func(st *state) error { st.Dirs = append(st.Dirs, dir); return nil }); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	args := []string{"-D", data, "-U", "postgres", "--no-sync", "--no-instructions", "--no-locale", "-E", "UTF8"}
	method := "trust"
	if o.Password != "" {
		method = "scram-sha-256"
		pwfile := filepath.Join(dir, "pwfile")
		if err := os.WriteFile(pwfile, []byte(o.Password+"\n"), 0o600); err != nil {
			return nil, err
		}
		os.Chown(pwfile, uid, gid)
		args = append(args, "--auth-local", "trust", "--auth-host", method, "--pwfile", pwfile)
	} else {
		args = append(args, "--auth", "trust")
	}
	cmd := exec.CommandContext(ctx, initdb, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb for %s: %v\n%s", h.Name, err, out)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(hba, "# netlab: the net's hosts\nhost all all %s %s\n", h.n.Subnet, method)
	hba.Close()
	addr := net.JoinHostPort(h.Addr.String(), strconv.Itoa(o.Port))
	return h.StartProcess(ctx, ProcessOptions{
		Name: "postgres",
		Argv: []string{postgres, "-D", data, "-p", strconv.Itoa(o.Port), "-c", "listen_addresses=" + h.Addr.String(),
			"-c", "unix_socket_directories=" + dir, "-c", "fsync=off", "-c", "logging_collector=off",
			"-c", "max_connections=30", "-c", "shared_buffers=16MB"},
		User:       "postgres",
		Dir:        dir,
		Addr:       addr,
		Ready:      &probe.Spec{Engine: "postgres", Target: addr},
		StopSignal: syscall.SIGINT, // fast shutdown
	})
}

// RedisOptions configure StartRedis.
type RedisOptions struct {
	Port int // default 6379
}

// StartRedis runs redis-server on the host's address, without persistence.
func (h *Host) StartRedis(ctx context.Context, o RedisOptions) (*Proc, error) {
	if o.Port == 0 {
		o.Port = 6379
	}
	bin, err := Redis.Path()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(h.Dir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(h.Addr.String(), strconv.Itoa(o.Port))
	return h.StartProcess(ctx, ProcessOptions{
		Name: "redis",
		Argv: []string{bin, "--bind", h.Addr.String(), "--port", strconv.Itoa(o.Port), "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--protected-mode", "no"},
		Addr:       addr,
		Ready:      &probe.Spec{Engine: "redis", Target: addr},
		StopSignal: syscall.SIGINT,
	})
}

// NginxOptions configure StartNginx: static pages, proxied paths, or both.
type NginxOptions struct {
	Name string // the process's name on the host; default "nginx"
	Port int    // default 80
	// Pages are files served from the root, by path ("index.html").
	Pages map[string]string
	// Routes proxy a path prefix to backends, balanced round robin with
	// kept-alive connections (as a load balancer does).
	Routes []Route
	// Ready is the path probed until nginx answers; default "/".
	Ready string
}

// Route sends requests under Path to Backends (host:port).
type Route struct {
	Path     string
	Backends []string
}

// StartNginx runs nginx on the host's address with a generated config,
// in the foreground, as one process.
func (h *Host) StartNginx(ctx context.Context, o NginxOptions) (*Proc, error) {
	if o.Name == "" {
		o.Name = "nginx"
	}
	if o.Port == 0 {
		o.Port = 80
	}
	if o.Ready == "" {
		o.Ready = "/"
	}
	bin, err := Nginx.Path()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(h.Dir, o.Name)
	root := filepath.Join(dir, "www")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	for p, body := range o.Pages {
		f := filepath.Join(root, filepath.Clean("/"+p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	listen := net.JoinHostPort(h.Addr.String(), strconv.Itoa(o.Port))
	if len(o.Pages) == 0 {
		root = ""
	}
	conf := NginxConfig(dir, listen, root, o.Routes)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// Inside the host: nginx -t binds the listen address to check it.
	if out, err := h.Run(ctx, bin, "-t", "-q", "-p", dir, "-c", confFile, "-e", "stderr"); err != nil {
		return nil, fmt.Errorf("nginx config for %s (%s): %v\n%s", h.Name, confFile, err, out)
	}
	return h.StartProcess(ctx, ProcessOptions{
		Name:       o.Name,
		Argv:       []string{bin, "-p", dir, "-c", confFile, "-e", "stderr"},
		Addr:       "http://" + listen + "/",
		Ready:      &probe.Spec{Engine: "tcp", Target: listen},
		StopSignal: syscall.SIGTERM,
	})
}

// NginxConfig is the config StartNginx writes: one server on listen,
// serving root (when not empty) and proxying each route to an upstream
// with kept-alive connections. Everything nginx writes stays in dir.
func NginxConfig(dir, listen, root string, routes []Route) string {
	var b strings.Builder
	fmt.Fprintf(&b, `daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	default_type text/html;
`, dir)
	for i, r := range routes {
		fmt.Fprintf(&b, "\tupstream route%d {\n", i)
		for _, be := range r.Backends {
			fmt.Fprintf(&b, "\t\tserver %s max_fails=0;\n", be)
		}
		b.WriteString("\t\tkeepalive 8;\n\t}\n")
	}
	fmt.Fprintf(&b, "\tserver {\n\t\tlisten %s;\n", listen)
	if root != "" {
		fmt.Fprintf(&b, "\t\troot %s;\n\t\tlocation / { index index.html; }\n", root)
	}
	for i, r := range routes {
		fmt.Fprintf(&b, `		location %s {
			proxy_pass http://route%d;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_connect_timeout 1s;
			proxy_read_timeout 5s;
		}
`, r.Path, i)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// SSHDOptions configure StartSSHD.
type SSHDOptions struct {
	// PasswordAuthentication and PermitRootLogin go into sshd_config
	// as given (defaults: no, prohibit-password).
	PasswordAuthentication bool
	PermitRootLogin        string
	// AuthorizedKeys are public key lines accepted for every user.
	AuthorizedKeys []string
}

// StartSSHD runs sshd on port 22 of the host's address with a generated
// sshd_config and host key in the host's directory. It logs to its log
// file (-e), not to syslog.
func (h *Host) StartSSHD(ctx context.Context, o SSHDOptions) (*Proc, error) {
	bin, err := SSHD.Path()
	if err != nil {
		return nil, err
	}
	keygen, err := SSHKeygen.Path()
	if err != nil {
		return nil, err
	}
	if bin, err = filepath.Abs(bin); err != nil { // sshd re-executes itself by its path
		return nil, err
	}
	if o.PermitRootLogin == "" {
		o.PermitRootLogin = "prohibit-password"
	}
	dir := filepath.Join(h.Dir, "sshd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := filepath.Join(dir, "ssh_host_ed25519_key")
	if _, err := os.Stat(key); os.IsNotExist(err) {
		if out, err := exec.CommandContext(ctx, keygen, "-q", "-t", "ed25519", "-N", "", "-C", h.Name, "-f", key).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen for %s: %v\n%s", h.Name, err, out)
		}
	}
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, []byte(strings.Join(o.AuthorizedKeys, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	yes := map[bool]string{true: "yes", false: "no"}
	conf := fmt.Sprintf(`# netlab: sshd of %[1]s
Port 22
ListenAddress %[2]s
HostKey %[3]s
PidFile %[4]s/sshd.pid
AuthorizedKeysFile %[5]s
PasswordAuthentication %[6]s
KbdInteractiveAuthentication no
PermitRootLogin %[7]s
UsePAM no
LogLevel VERBOSE
Subsystem sftp internal-sftp
`, h.Name, h.Addr, key, dir, keys, yes[o.PasswordAuthentication], o.PermitRootLogin)
	confFile := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// sshd wants its privilege separation directory; Debian makes it when
	// the service starts, which it never did here. Left in place: other
	// sshds need it too.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, bin, "-t", "-f", confFile).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sshd config for %s (%s): %v\n%s", h.Name, confFile, err, out)
	}
	addr := net.JoinHostPort(h.Addr.String(), "22")
	return h.StartProcess(ctx, ProcessOptions{
		Name:  "sshd",
		Argv:  []string{bin, "-D", "-e", "-f", confFile},
		Addr:  addr,
		Ready: &probe.Spec{Engine: "tcp", Target: addr},
	})
}

// AgentOptions configure StartAgent.
type AgentOptions struct {
	Bin string // the gridcity-agent binary
	// Join is the join line; empty when the agent is enrolled in State
	// already.
	Join string
	// State is the agent's state directory; default HOST_DIR/agent.
	State string
	// ConfigFile is the agent's config (agent.yaml); when empty, Config is
	// written to HOST_DIR/agent.yaml (default: just the name).
	ConfigFile string
	Config     string
	// Name is the server's name; default the host's.
	Name string
	Args []string // more flags (--log-level debug)
	Env  []string
	// ProcessName is the process's name on the host; default "agent".
	ProcessName string
}

// StartAgent runs gridcity-agent inside the host.
func (h *Host) StartAgent(ctx context.Context, o AgentOptions) (*Proc, error) {
	if o.Bin == "" {
		return nil, fmt.Errorf("agent on %s: no gridcity-agent binary given", h.Name)
	}
	if o.Name == "" {
		o.Name = h.Name
	}
	if o.ProcessName == "" {
		o.ProcessName = "agent"
	}
	if o.State == "" {
		o.State = filepath.Join(h.Dir, o.ProcessName)
	}
	if err := os.MkdirAll(o.State, 0o700); err != nil {
		return nil, err
	}
	if o.ConfigFile == "" {
		if o.Config == "" {
			o.Config = "name: " + o.Name + "\n"
		}
		o.ConfigFile = filepath.Join(h.Dir, o.ProcessName+".yaml")
		if err := os.WriteFile(o.ConfigFile, []byte(o.Config), 0o600); err != nil {
			return nil, err
		}
	}
	argv := []string{o.Bin, "run", "--state", o.State, "--name", o.Name, "--config", o.ConfigFile}
	if o.Join != "" {
		argv = append(argv, "--join", o.Join)
	}
	argv = append(argv, o.Args...)
	return h.StartProcess(ctx, ProcessOptions{Name: o.ProcessName, Argv: argv, Env: o.Env})
}
