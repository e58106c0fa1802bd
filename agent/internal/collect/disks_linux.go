package collect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// statfsTimeout bounds one statfs: on a dead NFS server it blocks for good,
// and one such mount must not cost the other disks.
const statfsTimeout = 5 * time.Second

type disksCollector struct {
	// mountsPaths are tried in order: pid 1's table is the host's even when
	// the agent runs in a mount namespace of its own (systemd's
	// ProtectSystem=, PrivateTmp=).
	mountsPaths []string
	rootFS      string
	sc          *lineScanner
	statfs      func(path string, st *unix.Statfs_t) error
	timeout     time.Duration

	mu sync.Mutex
	// stuck holds the mount points whose statfs has not returned; they are
	// not tried again until it does, so hung calls never pile up.
	stuck map[string]time.Time
}

func newDisksCollector(cfg Config, _ *slog.Logger) collector {
	return &disksCollector{
		mountsPaths: []string{
			filepath.Join(cfg.ProcRoot, "1", "mounts"),
			filepath.Join(cfg.ProcRoot, "self", "mounts"),
		},
		rootFS:  cfg.RootFS,
		sc:      newLineScanner(16 << 10),
		statfs:  unix.Statfs,
		timeout: statfsTimeout,
		stuck:   map[string]time.Time{},
	}
}

func (c *disksCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	mounts, err := c.readMounts(n)
	if err != nil {
		return err
	}
	disks := &gridcityv1.Disks{}
	for _, m := range mounts {
		st, err := c.boundedStatfs(ctx, filepath.Join(c.rootFS, m.point))
		if ctx.Err() != nil {
			return fmt.Errorf("statfs %s: %w", m.point, ctx.Err())
		}
		if err != nil {
			n.add(m.point, err.Error())
			continue
		}
		disks.Items = append(disks.Items, diskSection(m, fsStatsOf(st)))
	}
	out.Disks = disks
	return nil
}

// readMounts reads the first mount table it can. One longer than
// maxMountLines gives the mounts of its first lines and a note.
func (c *disksCollector) readMounts(n *notes) ([]mount, error) {
	var errs []error
	for _, path := range c.mountsPaths {
		var mounts []mount
		err := scanFile(c.sc, path, maxMountLines, func(s *lineScanner) error {
			mounts = parseMounts(s.lines())
			return nil
		})
		if errors.Is(err, errLineLimit) {
			n.add("mounts", fmt.Sprintf("%s has more than %d lines; only the first were read", path, maxMountLines))
			err = nil
		}
		if err == nil {
			return mounts, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// boundedStatfs runs statfs in a goroutine and gives up on it after
// c.timeout, marking the mount stuck until the call returns.
func (c *disksCollector) boundedStatfs(ctx context.Context, path string) (unix.Statfs_t, error) {
	c.mu.Lock()
	since, stuck := c.stuck[path]
	c.mu.Unlock()
	if stuck {
		return unix.Statfs_t{}, fmt.Errorf("statfs %s has been blocked since %s", path, since.UTC().Format(time.RFC3339))
	}

	type result struct {
		st  unix.Statfs_t
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = c.statfs(path, &r.st)
		c.mu.Lock()
		done <- r
		delete(c.stuck, path)
		c.mu.Unlock()
	}()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.st, wrapStatfs(path, r.err)
	case <-timer.C:
	case <-ctx.Done():
	}
	// The lock orders this against the goroutine: either its result is
	// already in done, or it will clear the mark set here.
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case r := <-done:
		return r.st, wrapStatfs(path, r.err)
	default:
		c.stuck[path] = time.Now()
		return unix.Statfs_t{}, fmt.Errorf("statfs %s did not return within %s", path, c.timeout)
	}
}

func wrapStatfs(path string, err error) error {
	if err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	return nil
}

func fsStatsOf(st unix.Statfs_t) fsStats {
	size := uint64(st.Frsize)
	if size == 0 {
		size = uint64(st.Bsize)
	}
	return fsStats{
		total:     satMul(st.Blocks, size),
		free:      satMul(st.Bfree, size),
		avail:     satMul(st.Bavail, size),
		files:     st.Files,
		filesFree: st.Ffree,
	}
}
