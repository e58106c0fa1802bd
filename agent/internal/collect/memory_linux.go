package collect

import (
	"context"
	"log/slog"
	"path/filepath"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

type memoryCollector struct {
	path string
	sc   *lineScanner
}

func newMemoryCollector(cfg Config, _ *slog.Logger) collector {
	return &memoryCollector{path: filepath.Join(cfg.ProcRoot, "meminfo"), sc: newLineScanner(8 << 10)}
}

func (c *memoryCollector) update(_ context.Context, out *gridcityv1.StateUpdate, _ *notes) error {
	var m meminfo
	err := scanFile(c.sc, c.path, maxMeminfoLines, func(s *lineScanner) (err error) {
		m, err = parseMeminfo(s.lines())
		return err
	})
	if err != nil {
		return err
	}
	out.Memory = memorySection(m)
	return nil
}
