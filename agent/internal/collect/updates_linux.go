package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gridcity/gridcity/agent/internal/hostquery"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// updatesTimeout bounds one check: dnf may refresh its metadata over the
// network first, which is slow but finishes.
const updatesTimeout = 10 * time.Minute

// pkgManager is a package manager the collector knows how to ask.
type pkgManager struct {
	name, path string
}

// packageManagers are tried in order; a host with both apt and dnf
// installed is a Debian host that carries dnf as a tool.
var packageManagers = []pkgManager{
	{"apt", "/usr/bin/apt-get"},
	{"dnf", "/usr/bin/dnf"},
	{"yum", "/usr/bin/yum"},
}

// updatesCollector asks the package manager what an upgrade would do, from
// the package lists the host already has: refreshing them needs root and
// the network, and is the job of the host's own timer (apt-daily,
// dnf-makecache).
type updatesCollector struct {
	managers []pkgManager
}

func newUpdatesCollector(Config, *slog.Logger) collector {
	return &updatesCollector{managers: packageManagers}
}

func (c *updatesCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	m, ok := c.find()
	if !ok {
		return errors.New("no supported package manager (apt-get, dnf, yum) found")
	}
	ctx, cancel := context.WithTimeout(ctx, updatesTimeout)
	defer cancel()
	var (
		counts pkgCounts
		err    error
	)
	if m.name == "apt" {
		counts, err = checkApt(ctx, m.path, n)
	} else {
		counts, err = checkDnf(ctx, m.path, n)
	}
	if err != nil {
		return err
	}
	out.Updates = updatesSection(m.name, counts, time.Now())
	return nil
}

func (c *updatesCollector) find() (pkgManager, bool) {
	for _, m := range c.managers {
		if _, err := os.Stat(m.path); err == nil {
			return m, true
		}
	}
	return pkgManager{}, false
}

// checkApt simulates a dist-upgrade. NoLocking lets the simulation run
// while unattended-upgrades holds the dpkg lock, which as root it would
// otherwise wait for.
func checkApt(ctx context.Context, path string, n *notes) (pkgCounts, error) {
	out, err := query(ctx, n, path, "-o", "Debug::NoLocking=true", "--just-print", "dist-upgrade")
	if err != nil {
		return pkgCounts{}, err
	}
	return parseApt(linesOf(out, maxUpdatesLines)), nil
}

// checkDnf counts pending updates (check-update exits 100 when there are
// some) and then the security ones. A failing security query costs the
// security count only, and says so.
func checkDnf(ctx context.Context, path string, n *notes) (pkgCounts, error) {
	out, err := query(ctx, n, path, "-q", "check-update")
	var exitErr *hostquery.ExitError
	if errors.As(err, &exitErr) && exitErr.Code == 100 {
		err = nil
	}
	if err != nil {
		return pkgCounts{}, err
	}
	counts := pkgCounts{pending: parseDnfCheckUpdate(linesOf(out, maxUpdatesLines))}
	out, err = query(ctx, n, path, "-q", "updateinfo", "list", "--security")
	if err != nil {
		n.add("security", err.Error())
		return counts, nil
	}
	counts.security, counts.securityPkgs = parseDnfSecurity(linesOf(out, maxUpdatesLines))
	return counts, nil
}

// query runs a package manager query; output cut at the bound is still
// parsed, and the counts it gives are noted as a lower bound.
func query(ctx context.Context, n *notes, argv ...string) ([]byte, error) {
	out, _, err := hostquery.Query(ctx, maxUpdatesOutput, argv...)
	if errors.Is(err, hostquery.ErrOutputTruncated) {
		n.add("output", fmt.Sprintf("%s printed more than %d MiB; the counts are a lower bound", argv[0], maxUpdatesOutput>>20))
		// Drop the last line, which the cut may have broken.
		if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
			out = out[:i+1]
		}
		err = nil
	}
	return out, err
}
