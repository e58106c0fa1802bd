package collect

import (
	"context"
	"log/slog"
	"path/filepath"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// cpuCollector keeps the previous /proc/stat sample, since busy time is a
// difference, and the model, which is read once: cpuinfo is long on big
// machines and the model does not change.
type cpuCollector struct {
	statPath, loadPath, infoPath string
	sc                           *lineScanner

	prev      cpuTimes
	busy      *float64 // nil until two samples
	model     string
	modelRead bool
}

func newCPUCollector(cfg Config, _ *slog.Logger) collector {
	return &cpuCollector{
		statPath: filepath.Join(cfg.ProcRoot, "stat"),
		loadPath: filepath.Join(cfg.ProcRoot, "loadavg"),
		infoPath: filepath.Join(cfg.ProcRoot, "cpuinfo"),
		sc:       newLineScanner(16 << 10),
	}
}

func (c *cpuCollector) update(_ context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	var t cpuTimes
	err := scanFile(c.sc, c.statPath, maxStatLines, func(s *lineScanner) (err error) {
		t, err = parseStat(s.lines())
		return err
	})
	if err != nil {
		return err
	}
	var l1, l5, l15 float64
	err = scanFile(c.sc, c.loadPath, 1, func(s *lineScanner) (err error) {
		l1, l5, l15, err = parseLoadavg(s.lines())
		return err
	})
	if err != nil {
		return err
	}
	if !c.modelRead {
		// A missing cpuinfo costs the model only, and is not retried.
		_ = scanFile(c.sc, c.infoPath, maxCPUInfoLines, func(s *lineScanner) error {
			c.model = parseCPUModel(s.lines())
			return nil
		})
		c.modelRead = true
	}
	busy, why := busyPercent(c.prev, t, c.busy)
	if busy == nil {
		n.add("busy", why)
	}
	c.busy, c.prev = busy, t
	out.Cpu = cpuSection(t, c.busy, l1, l5, l15, c.model)
	return nil
}
