//go:build !linux

package collect

import (
	"context"

	"github.com/shirou/gopsutil/v4/host"
)

func (c *hostCollector) bootTime(ctx context.Context) (uint64, error) {
	return host.BootTimeWithContext(ctx)
}
