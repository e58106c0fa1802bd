package collect

import (
	"context"
	"path/filepath"
)

// bootTime reads btime from /proc/stat itself: gopsutil computes it from
// the uptime and the clock inside containers, which makes it wander by a
// second from call to call, and it decides that through a detection it
// caches for the whole process.
func (c *hostCollector) bootTime(context.Context) (uint64, error) {
	var boot uint64
	err := scanFile(newLineScanner(maxLine+1), filepath.Join(c.procRoot, "stat"), maxStatLines, func(s *lineScanner) (err error) {
		boot, err = parseBtime(s.lines())
		return err
	})
	return boot, err
}
