// Command gridcity-agent runs on every server: it streams the host's state to
// the coordinator and (from a later release) runs the commands a person
// approved there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gridcity/gridcity/agent/internal/cmdjournal"
	"github.com/gridcity/gridcity/agent/internal/collect"
	"github.com/gridcity/gridcity/agent/internal/link"
	"github.com/gridcity/gridcity/agent/internal/runner"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

var version = "dev"

// exitConfig is EX_CONFIG from sysexits.h: the operator has to act.
const exitConfig = 78

// enrollAttempts is how often `gridcity-agent enroll` tries a coordinator
// that is unreachable or busy before it gives up (about 15 s of backoff).
const enrollAttempts = 5

// configError marks errors of configuration or enrollment, which exit with
// exitConfig; its message is the wrapped one's.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func configErr(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

const usage = `gridcity-agent — streams this server's state to a gridcity coordinator

Usage:
  gridcity-agent run      --join "JOIN LINE" | --coordinator ADDR --token T --ca-pin sha256:HEX
                          [--name NAME] [--state DIR] [--config FILE]
  gridcity-agent run      [--state DIR] [--config FILE]          (once enrolled)
  gridcity-agent enroll   --join "JOIN LINE" [--name NAME] [--state DIR]
  gridcity-agent snapshot [--json]
  gridcity-agent version

Every flag also reads GRIDCITY_AGENT_<FLAG> from the environment (--join:
GRIDCITY_AGENT_JOIN). GRIDCITY_<FLAG> names are the coordinator's and are ignored.
`

// gcPercent is the agent's garbage-collection target unless GOGC sets one.
// Its live heap is under 1 MiB and grows by a few KiB a second, so Go's
// default (100, with a 4 MiB minimum) lets garbage reach 4 MiB between
// collections, several times the live heap, all of it resident; at 25 a
// collection comes about once a minute and costs about a millisecond.
const gcPercent = 25

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the usage was asked for and printed
		}
		fmt.Fprintln(os.Stderr, "gridcity-agent:", err)
		// A refusal that restarting cannot fix (revoked, not enrolled, bad
		// config) exits with EX_CONFIG, which the unit does not restart.
		var perm *link.PermanentError
		var cfg *configError
		if errors.As(err, &perm) || errors.As(err, &cfg) {
			os.Exit(exitConfig)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "askpass":
		// sudo runs this (through the runner's askpass script) to fetch
		// the sudo password an approver typed; it takes no flags.
		return runner.Askpass()
	case "run":
		return cmdRun(ctx, args[1:], stderr, false)
	case "enroll":
		return cmdRun(ctx, args[1:], stderr, true)
	case "snapshot":
		return cmdSnapshot(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "gridcity-agent", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// envPrefix is where the agent's flags are read from the environment. The
// coordinator reads GRIDCITY_<FLAG>; both run side by side (make run, a
// coordinator host that also runs an agent) and share a shell, so the agent
// has names of its own: GRIDCITY_CONFIG=city.yaml is the coordinator's file,
// and the agent must not load it.
const envPrefix = "GRIDCITY_AGENT_"

// oldEnvPrefix is the names the agent read before it had its own; they are
// ignored, with a warning, so that an agent.env written then is renamed.
const oldEnvPrefix = "GRIDCITY_"

func envName(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse applies the environment (GRIDCITY_AGENT_<FLAG>), then the command
// line, which wins. It returns a warning for each GRIDCITY_<FLAG> set without
// its GRIDCITY_AGENT_<FLAG> or the flag: the name an older agent read, now
// ignored.
func parse(fs *flag.FlagSet, args []string) (warnings []string, err error) {
	var envErr error
	ignored := map[string]string{} // flag name → its old variable
	fs.VisitAll(func(f *flag.Flag) {
		key := envName(envPrefix, f.Name)
		v, ok := os.LookupEnv(key)
		if !ok {
			if old := envName(oldEnvPrefix, f.Name); os.Getenv(old) != "" {
				ignored[f.Name] = old
			}
			return
		}
		if envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment %s=%q: %w (see --%s)", key, v, err, f.Name)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// A flag the environment did not set was set by the command line, which
	// would have won over the old variable too: nothing changed for it.
	fs.Visit(func(f *flag.Flag) { delete(ignored, f.Name) })
	fs.VisitAll(func(f *flag.Flag) {
		if old, ok := ignored[f.Name]; ok {
			warnings = append(warnings, fmt.Sprintf("%s is set but ignored: it is the coordinator's; the agent reads %s (if it is meant for this agent, rename it, e.g. in /etc/gridcity/agent.env)", old, envName(envPrefix, f.Name)))
		}
	})
	return warnings, nil
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer, enrollOnly bool) error {
	verb := "run"
	if enrollOnly {
		verb = "enroll"
	}
	fs := flag.NewFlagSet("gridcity-agent "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	join := fs.String("join", "", "the join line printed by 'gridcity join' on the coordinator")
	coord := fs.String("coordinator", "", "coordinator HOST:PORT (with --token and --ca-pin, instead of --join)")
	token := fs.String("token", "", "join token (with --coordinator)")
	pin := fs.String("ca-pin", "", "sha256:HEX pin of the coordinator's CA (with --coordinator)")
	name := fs.String("name", "", "this server's name in the fleet (default: the config's name, else the host name)")
	state := fs.String("state", defaultStateDir(), "state directory: the agent's identity")
	configPath := fs.String("config", "", "YAML config file (default "+defaultConfigFile+" when it exists)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json, one event per line")
	envWarnings, err := parse(fs, args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level %q (--log-level or %s): use debug, info, warn or error", *logLevel, envName(envPrefix, "log-level"))
	}
	var logger *slog.Logger
	switch opts := (&slog.HandlerOptions{Level: level}); *logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		return fmt.Errorf("log format %q (--log-format or %s): use text or json", *logFormat, envName(envPrefix, "log-format"))
	}
	for _, w := range envWarnings {
		logger.Warn(w)
	}
	if *configPath == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			*configPath = defaultConfigFile
		}
	}
	cfg, err := LoadConfig(*configPath)
	if err != nil {
		return configErr("%w", err)
	}
	if *name != "" {
		cfg.Name = *name
	}
	if err := cfg.Validate(); err != nil {
		return configErr("%w", err)
	}

	var jl *gridcityv1.JoinLine
	switch {
	case *join != "" && *coord != "":
		return errors.New("give either --join or --coordinator/--token/--ca-pin, not both")
	case *join != "":
		j, err := gridcityv1.ParseJoinLine(*join)
		if err != nil {
			return err
		}
		jl = &j
	case *coord != "" || *token != "" || *pin != "":
		if *coord == "" || *token == "" || *pin == "" {
			return errors.New("--coordinator, --token and --ca-pin go together")
		}
		j, err := gridcityv1.ParseJoinLine(gridcityv1.JoinLine{Coordinator: *coord, Token: *token, CAPin: *pin}.String())
		if err != nil {
			return err
		}
		jl = &j
	}

	// The state directory holds the agent's private key and its command
	// journal: others may not enter it, whatever the umask made it. A
	// missing one is left to the enrollment to create (0700, which no umask
	// widens), so that a refused join line still leaves nothing behind.
	if _, err := os.Stat(*state); err == nil {
		if was, err := atomicfile.PrivateDir(*state, "state directory"); err != nil {
			return configErr("%w", err)
		} else if was != 0 {
			logger.Warn("made the state directory private (0700): other users could enter it", "state", *state, "was", fmt.Sprintf("%04o", was))
		}
	}
	id, err := link.LoadIdentity(*state)
	switch {
	case err == nil && jl != nil && id.JoinTokenHash == link.TokenHash(jl.Token) && id.CAPin == jl.CAPin:
		// The same join line again (a re-run installer, a unit that keeps --join).
		if *name != "" && id.Name != *name {
			return configErr("this agent is enrolled as %q, not %q: drop --name, or enroll with a new join line", id.Name, *name)
		}
		logger.Info("already enrolled with this join line; it is not needed again", "name", id.Name)
	case (err == nil || errors.Is(err, link.ErrNotEnrolled)) && jl != nil:
		// A new join line: enroll again (after a revocation, or to move to
		// another coordinator), under the same name unless --name says
		// otherwise. The old identity stays until this succeeds.
		enrollName := cfg.Name
		if id != nil && *name == "" {
			enrollName = id.Name
		}
		// run keeps trying while the coordinator is unreachable or busy
		// (a server booting before the coordinator, a fleet enrolling at
		// once), as it does once enrolled; enroll, run by a person or an
		// installer, gives up after a few tries. A refusal ends both.
		attempts := 0
		if enrollOnly {
			attempts = enrollAttempts
		}
		id, err = link.EnrollRetrying(ctx, *state, *jl, enrollName, version, attempts, logger)
		if ctx.Err() != nil {
			return nil
		}
		var retry *link.RetryableError
		if errors.As(err, &retry) {
			return err // exit 1: systemd may restart it
		}
		if err != nil {
			return configErr("%w", err)
		}
		logger.Info("enrolled", "name", id.Name, "coordinator", id.Coordinator, "state", *state)
	case errors.Is(err, link.ErrNotEnrolled):
		return configErr("not enrolled yet (no identity in %s): pass the join line from `gridcity join` with --join", *state)
	case err != nil:
		return err
	}
	if enrollOnly {
		return nil
	}
	if id.Name != cfg.Name && *name == "" {
		logger.Warn("the config names this server differently from its enrollment; the enrolled name is used (enroll with a new join line and --name to rename it)", "enrolled", id.Name, "config", cfg.Name)
	}
	ccfg := collect.DefaultConfig()
	ccfg.AuthLogs, ccfg.StateDir = cfg.AuthLogs, *state
	set := collect.New(ccfg, logger)
	opts := link.Options{Version: version, District: cfg.District, RunAs: cfg.RunAs, Probes: cfg.Probes, StateDir: *state}
	if cfg.Commands {
		j, err := cmdjournal.Open(*state, logger)
		if err != nil {
			// Without the journal, at most once cannot be kept: run nothing.
			opts.CommandsOff = "commands are off on this server: its command journal cannot be opened (" + err.Error() + ")"
			logger.Error("commands turned off", "reason", opts.CommandsOff)
		} else {
			defer j.Close()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Commands = link.NewCommands(j, cfg.RunAs, exe, logger)
		}
	}
	client := link.NewClient(id, set, opts, logger)
	logger.Info("agent starting", "version", version, "name", id.Name, "coordinator", id.Coordinator)
	err = client.Run(ctx)
	if ctx.Err() != nil {
		logger.Info("agent stopping", "reason", context.Cause(ctx))
	}
	return err
}

const defaultConfigFile = "/etc/gridcity/agent.yaml"

func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/gridcity-agent"
	}
	if d, err := os.UserConfigDir(); err == nil {
		return d + "/gridcity-agent"
	}
	return ".gridcity-agent"
}

func cmdSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gridcity-agent snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the state as JSON")
	envWarnings, err := parse(fs, args)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, w := range envWarnings {
		logger.Warn(w)
	}
	set := collect.New(collect.DefaultConfig(), logger)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Two fast samples a second apart, so that the CPU figure is current
	// rather than the average since boot.
	set.Collect(ctx, collect.TierFast)
	time.Sleep(time.Second)
	st := set.Collect(ctx, collect.TierFast, collect.TierMedium, collect.TierSlow)
	// The package manager last, so that its work is not in the CPU figure.
	collect.Merge(st, set.Collect(ctx, collect.TierUpdates))
	st.Full = true
	if *asJSON {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(st)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	return printSnapshot(stdout, st)
}
