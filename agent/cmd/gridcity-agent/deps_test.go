package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/lib/deptest"
)

// The house rules of gridcity-agent as tests, from what `go list -deps` says
// the binary links (after tailscale's cmd/tailscaled/deps_test.go). The
// runner's own TestOnlyCommandPathImportsRunner checks the agent module's
// sources, tests included; these check the binary, lib's packages included.

// TestNoHarnessInAgent: the agent binary links no test, benchmark or demo
// code.
func TestNoHarnessInAgent(t *testing.T) {
	deptest.NoHarness(t, deptest.Module+"lib/atomicfile")
}

// TestAgentProcesses: of the packages of ours that the agent links, only
// the command path reaches the runner of approved commands, and only
// hostquery and the runner import os/exec, whichever module they are in.
// A collector that could call the runner would be one edit away from
// running something nobody approved.
func TestAgentProcesses(t *testing.T) {
	const (
		runner    = deptest.Module + "agent/internal/runner"
		hostquery = deptest.Module + "agent/internal/hostquery"
		collect   = deptest.Module + "agent/internal/collect"
	)
	commandPath := []string{deptest.Module + "agent/cmd/gridcity-agent", deptest.Module + "agent/internal/link", deptest.Module + "agent/internal/cmdjournal"}
	for _, goos := range deptest.GOOSes {
		pkgs := deptest.List(t, deptest.Options{GOOS: goos, Tags: deptest.ReleaseTags}, ".")
		var seenRunner, seenExec, seenCollect bool
		for _, p := range pkgs {
			if !strings.HasPrefix(p.ImportPath, deptest.Module) {
				continue
			}
			seenCollect = seenCollect || p.ImportPath == collect
			for _, imp := range p.Imports {
				switch imp {
				case runner:
					seenRunner = true
					if !slices.Contains(commandPath, p.ImportPath) {
						t.Errorf("GOOS=%s: %s imports %s; only the command path (%s) may: run read-only queries through %s",
							goos, p.ImportPath, runner, strings.Join(commandPath, ", "), hostquery)
					}
				case "os/exec":
					seenExec = true
					if p.ImportPath != hostquery && p.ImportPath != runner {
						t.Errorf("GOOS=%s: %s imports os/exec; only %s and %s start processes", goos, p.ImportPath, hostquery, runner)
					}
				}
			}
		}
		if !seenRunner || !seenExec || !seenCollect {
			t.Fatalf("GOOS=%s: the agent's %d packages show runner imported %v, os/exec imported %v, collectors linked %v; want all three, or the listing proves nothing",
				goos, len(pkgs), seenRunner, seenExec, seenCollect)
		}
		// Nor through another package: the collectors' own dependencies.
		if chain := deptest.Chain(pkgs, collect, runner); chain != "" {
			t.Errorf("GOOS=%s: the collectors reach the runner: %s", goos, chain)
		}
	}
}
