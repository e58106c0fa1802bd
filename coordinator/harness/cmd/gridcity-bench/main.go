// Command gridcity-bench is the driver of `make bench` (scripts/bench.sh):
// it measures running processes from /proc, scrapes the peer exporter, times
// approved commands from approval to result next to ssh localhost, runs the
// agent's Go benchmarks and writes bench/report.json and
// bench/report.md. It is a benchmark, not a test: a figure that misses its
// aim is reported as missed, and only a failure to measure is an error.
// It is harness, not part of the product: no deb or rpm ships it.
//
//	gridcity-bench ports N
//	gridcity-bench measure -agent-pid P -agent-log F -exporter-pid P -exporter-url U -out live.json
//	gridcity-bench latency -http ADDR -data DIR -server NAME -ssh-port P -ssh-key K -ssh-config F -ssh-control S -out latency.json
//	gridcity-bench agents  -n N -pid P -data DIR -gridcity bin/gridcity -out agents-N.json
//	gridcity-bench failover -replica PID,DATA,HTTP … -n 1000 -out failover.json   (GRIDCITY_STORE set)
//	gridcity-bench spread   -replica PID,DATA,HTTP … -n 10000 -out spread.json    (GRIDCITY_STORE set)
//	gridcity-bench seed     -data DIR -servers 10 -days 7      (before the coordinator starts there)
//	gridcity-bench app      -n 1000 -data DIR -gridcity bin/gridcity -chromium chromium -out app.json
//	gridcity-bench report  -live live.json [-latency latency.json] [-agents agents-N.json …] [-gotest collect.test -gotest-dir DIR] -out bench
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gridcity-bench:", err)
		if errors.Is(err, errNotHeld) {
			os.Exit(exitNotHeld)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: gridcity-bench ports|measure|latency|agents|failover|spread|seed|app|report [flags]")
	}
	switch args[0] {
	case "ports":
		return cmdPorts(args[1:])
	case "measure":
		return cmdMeasure(args[1:])
	case "latency":
		return cmdLatency(args[1:])
	case "agents":
		return cmdAgents(args[1:])
	case "failover", "spread":
		return cmdHA(args[0], args[1:])
	case "seed":
		return cmdSeed(args[1:])
	case "app":
		return cmdApp(args[1:])
	case "report":
		return cmdReport(args[1:])
	}
	return fmt.Errorf("unknown command %q: use ports, measure, latency, agents, failover, spread, seed, app or report", args[0])
}

// cmdPorts prints N free loopback TCP ports, one a line. They are held open
// together while chosen so that they differ.
func cmdPorts(args []string) error {
	fs := flag.NewFlagSet("ports", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := 1
	if fs.NArg() > 0 {
		v, err := strconv.Atoi(fs.Arg(0))
		if err != nil || v < 1 || v > 16 {
			return fmt.Errorf("ports: %q is not a count from 1 to 16", fs.Arg(0))
		}
		n = v
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}
