package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/frontdoor"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/publicurl"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

// runtimeInfo is written to DATA/coordinator.json at start so that the CLI
// (join, mcp) knows where the running coordinator listens.
type runtimeInfo struct {
	HTTP      string `json:"http"`
	GRPC      string `json:"grpc"`
	Advertise string `json:"advertise"`
	TLS       bool   `json:"tls"` // of HTTP
	// PublicURL is --public-url, where clients elsewhere reach the
	// coordinator, and HTTPS the address its listener got (https.go);
	// both "" without one.
	PublicURL string `json:"publicURL,omitempty"`
	HTTPS     string `json:"https,omitempty"`
}

// defaultGCPercent is serve's GOGC unless the environment sets one.
const defaultGCPercent = 50

// tuneGC sets the garbage collector's percent to defaultGCPercent unless
// GOGC is set.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// serveOptions is what serve was asked for, checked.
type serveOptions struct {
	store                         storeFlags
	data                          string
	httpAddr, grpcAddr, advertise string
	tlsCert, tlsKey               string
	pub                           publicFlags   // https.go
	public                        publicurl.URL // --public-url, checked
	publicHTTP                    bool
	configPath                    string
	appURL                        string
	bodyTimeout                   time.Duration
	logger                        *slog.Logger
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := serveFlags(args, stderr)
	if err != nil {
		return err
	}
	// The coordinator's heap is mostly what it holds for each connected
	// agent, long-lived and slowly allocated: collecting when the heap has
	// grown by half rather than doubled keeps about a quarter of its memory
	// at 10,000 agents for a little more collection work (bench/profiles.md).
	// GOGC in the environment sets it as usual.
	tuneGC(os.Getenv)
	c, err := newCoordinator(ctx, o, stdout)
	if err != nil {
		return err
	}
	defer c.close()
	return c.run(ctx)
}

// serveFlags reads serve's flags and checks them.
func serveFlags(args []string, stderr io.Writer) (serveOptions, error) {
	fs := newFlags("serve", stderr)
	o := serveOptions{store: addStoreFlags(fs)}
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:4600", "HTTP address: /mcp, /healthz, /metrics and the app")
	fs.StringVar(&o.grpcAddr, "grpc", ":4601", "gRPC address the agents connect to (always TLS)")
	fs.StringVar(&o.advertise, "advertise", "", "HOST:PORT agents dial, as written into join lines (default: this host's first non-loopback address and the gRPC port)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "certificate file (PEM, with its chain) for HTTPS on --public-url's listener, else on --http; read again when it changes")
	fs.StringVar(&o.tlsKey, "tls-key", "", "key file that goes with --tls-cert; read again when it changes")
	addPublicFlags(fs, &o.pub)
	fs.BoolVar(&o.publicHTTP, "public-http", false, "allow plain HTTP on a non-loopback --http address (put TLS in front of it)")
	fs.StringVar(&o.configPath, "config", "", "YAML file: districts, resources, links, probe defaults, runbooks")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json, one event per line")
	fs.StringVar(&o.appURL, "app-url", "", "the app's address as people open it (behind a proxy, say), for the links in notifications (default: from --http)")
	fs.DurationVar(&o.bodyTimeout, "body-timeout", frontdoor.DefaultBodyTimeout, "longest a client may take to send a request's body after its headers (which have "+frontdoor.HeaderTimeout.String()+"); answers, such as run_command's wait and the app's event stream, are not bounded by it")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	o.data = *o.store.data
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return o, err
	}
	o.logger = logger
	if err := o.checkPublic(); err != nil {
		return o, err
	}
	return o, o.check()
}

// check refuses options that cannot work, saying what to give instead
// (checkPublic has parsed --public-url).
func (o serveOptions) check() error {
	for flagName, addr := range map[string]string{"--http": o.httpAddr, "--grpc": o.grpcAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q is not an address: use HOST:PORT, e.g. 127.0.0.1:4600 or :4601", flagName, addr)
		}
	}
	if o.advertise != "" {
		if err := gridcityv1.CheckReplicaAddress(o.advertise); err != nil {
			return fmt.Errorf("--advertise: %w", err)
		}
	}
	if o.bodyTimeout <= 0 {
		return fmt.Errorf("--body-timeout %s: give a positive duration, e.g. 30s", o.bodyTimeout)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if !loopback.Host(o.httpAddr) {
		if !o.public.IsZero() && !o.publicHTTP {
			return fmt.Errorf("--http %s is reachable from other hosts, and with --public-url it serves plain HTTP: leave it on loopback (the default; the public listener is --https), or give --public-http if a TLS proxy sits in front", o.httpAddr)
		}
		if o.tlsCert == "" && !o.publicHTTP {
			return fmt.Errorf("--http %s is reachable from other hosts: give --tls-cert and --tls-key, or --public-http if a TLS proxy sits in front", o.httpAddr)
		}
		o.logger.Warn("HTTP listens on a non-loopback address; the MCP endpoint and the app are reachable from the network", "http", o.httpAddr)
	}
	return nil
}

// lockData keeps a second coordinator off the same data directory (which
// must exist): it would rewrite coordinator.json under the first one and
// race its store.
func lockData(data string) (func(), error) {
	path := filepath.Join(data, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil { // whatever the umask, or an older gridcity, made it
		f.Close()
		return nil, fmt.Errorf("make %s private: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		pid, _ := os.ReadFile(path)
		return nil, fmt.Errorf("another coordinator (pid %s) is serving from %s: stop it first, or give this one its own --data", strings.TrimSpace(string(pid)), data)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { f.Close() }, nil
}

// defaultAdvertise picks the address agents should dial: the gRPC host if it
// is specific, else this host's first non-loopback IPv4 address.
func defaultAdvertise(grpcAddr string) string {
	host, port, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return grpcAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return grpcAddr
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return net.JoinHostPort(n.IP.String(), port)
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}

func writeJSONFile(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(dir, name, append(b, '\n'))
}

func readRuntime(data string) (runtimeInfo, error) {
	var info runtimeInfo
	b, err := os.ReadFile(filepath.Join(data, "coordinator.json"))
	if errors.Is(err, os.ErrNotExist) {
		hint := ""
		if fi, err := os.Stat(filepath.Join(".run", "coordinator", "coordinator.json")); err == nil && fi.Mode().IsRegular() {
			hint = " (the one `make run` started here has --data .run/coordinator)"
		}
		return info, fmt.Errorf("no coordinator has run with --data %s yet: give --data (or GRIDCITY_DATA) the data directory of the coordinator you started%s, or start `gridcity serve --data %s` first", data, hint, data)
	}
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}
