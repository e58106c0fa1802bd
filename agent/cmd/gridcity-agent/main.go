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
	"strings"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gridcity/gridcity/agent/internal/collect"
	"github.com/gridcity/gridcity/agent/internal/link"
)

var version = "dev"

const usage = `gridcity-agent — streams this server's state to a gridcity coordinator

Usage:
  gridcity-agent run      --join "JOIN LINE" | --coordinator ADDR --token T --ca-pin sha256:HEX
                          [--name NAME] [--state DIR] [--config FILE]
  gridcity-agent run      [--state DIR] [--config FILE]          (once enrolled)
  gridcity-agent enroll   --join "JOIN LINE" [--name NAME] [--state DIR]
  gridcity-agent snapshot [--json]
  gridcity-agent version

Every flag also reads GRIDCITY_<FLAG> from the environment (--join: GRIDCITY_JOIN).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gridcity-agent:", err)
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

func parse(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "GRIDCITY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", key, v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer, enrollOnly bool) error {
	fs := flag.NewFlagSet("gridcity-agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	join := fs.String("join", "", "the join line printed by `gridcity join`")
	coord := fs.String("coordinator", "", "coordinator HOST:PORT (with --token and --ca-pin, instead of --join)")
	token := fs.String("token", "", "join token (with --coordinator)")
	pin := fs.String("ca-pin", "", "sha256:HEX pin of the coordinator's CA (with --coordinator)")
	name := fs.String("name", "", "this server's name in the fleet (default: the config's name, else the host name)")
	state := fs.String("state", defaultStateDir(), "state directory: the agent's identity")
	configPath := fs.String("config", "", "YAML config file")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parse(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := LoadConfig(*configPath)
	if err != nil {
		return err
	}
	if *name != "" {
		cfg.Name = *name
	}
	if err := cfg.Validate(); err != nil {
		return err
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

	id, err := link.LoadIdentity(*state)
	switch {
	case err == nil && jl != nil && id.CAPin == jl.CAPin && id.Coordinator == jl.Coordinator:
		if id.Name != cfg.Name {
			return fmt.Errorf("this agent is enrolled as %q, not %q: drop --name, or remove %s/identity.json and enroll again", id.Name, cfg.Name, *state)
		}
		logger.Info("already enrolled with this coordinator; the join line is not needed again", "name", id.Name)
	case (err == nil || errors.Is(err, link.ErrNotEnrolled)) && jl != nil:
		id, err = link.Enroll(ctx, *state, *jl, cfg.Name, version)
		if err != nil {
			return err
		}
		logger.Info("enrolled", "name", id.Name, "coordinator", id.Coordinator, "state", *state)
	case errors.Is(err, link.ErrNotEnrolled):
		return fmt.Errorf("not enrolled yet (no identity in %s): pass the join line from `gridcity join` with --join", *state)
	case err != nil:
		return err
	}
	if enrollOnly {
		return nil
	}
	set := collect.New(collect.DefaultConfig(), logger)
	client := link.NewClient(id, set, link.Options{
		Version: version, District: cfg.District, RunAs: cfg.RunAs, CommandsEnabled: cfg.Commands,
	}, logger)
	logger.Info("agent starting", "version", version, "name", id.Name, "coordinator", id.Coordinator)
	return client.Run(ctx)
}

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
	if err := parse(fs, args); err != nil {
		return err
	}
	set := collect.New(collect.DefaultConfig(), slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Two fast samples a second apart, so that the CPU figure is current
	// rather than the average since boot.
	set.Collect(ctx, collect.TierFast)
	time.Sleep(time.Second)
	st := set.Full(ctx)
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
