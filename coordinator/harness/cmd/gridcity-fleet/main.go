// Command gridcity-fleet runs the gridcity demo: a small city of real
// hosts on this machine — network namespaces on a bridge of its own, each
// with its services and a gridcity-agent — watched by a coordinator, for an
// AI client to look after (make demo, demo-break, demo-fix, demo-down).
// Its app and scrape commands are the city's orders API and scraper.
// It is a demo and test harness, not part of the product: no deb or rpm
// ships it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `gridcity-fleet — the gridcity demo city (make demo …); needs root

Usage:
  gridcity-fleet up     [--dir DIR] [--http ADDR] [--install]   # build the city and watch it; Ctrl-C tears it down
  gridcity-fleet break  [--dir DIR] [--wait=false]              # stop the city's database (orders-db)
  gridcity-fleet fix    [--dir DIR] [--wait=false]              # start it again
  gridcity-fleet status [--dir DIR]                             # hosts, processes, and the incident report
  gridcity-fleet down   [--dir DIR]                             # tear everything down, also after a crash
  gridcity-fleet app    --listen ADDR --db HOST:PORT            # the orders API (runs inside the city)
  gridcity-fleet scrape --url URL [--every DURATION]            # the scraper (runs inside the city)

DIR is .demo by default: the coordinator's data, the config, the hosts' files and the logs.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		name := "gridcity-fleet"
		if len(os.Args) > 1 {
			name += " " + os.Args[1]
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "up":
		return cmdUp(ctx, rest, stdout, stderr)
	case "break":
		return cmdBreak(ctx, rest, stdout, stderr)
	case "fix":
		return cmdFix(ctx, rest, stdout, stderr)
	case "status":
		return cmdStatus(ctx, rest, stdout, stderr)
	case "down":
		return cmdDown(ctx, rest, stdout, stderr)
	case "app":
		return cmdApp(ctx, rest, stdout, stderr)
	case "scrape":
		return cmdScrape(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gridcity-fleet "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

type usageError string

func (e usageError) Error() string { return string(e) }
