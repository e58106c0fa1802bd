package collect

import (
	"context"
	"log/slog"

	"github.com/gridcity/gridcity/agent/internal/authlog"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("logins", TierFast, newLoginsCollector) }

// loginsCollector follows sshd's log (cfg.AuthLogs, or the journal where
// none of them exists) and reports SSH authentication per source over the
// last 24 hours. It runs with the fast tier, so that an attack reaches the
// coordinator within seconds; an unchanged log costs a stat per file, and
// the section it returns then is the same, so Changes sends nothing.
//
// The journal is looked for under RootFS, like the mount points: an agent
// in a container sees the host's journal there.
type loginsCollector struct {
	follower *authlog.Follower
}

func newLoginsCollector(cfg Config, logger *slog.Logger) collector {
	return &loginsCollector{follower: authlog.New(authlog.Config{
		Files:    cfg.AuthLogs,
		StateDir: cfg.StateDir,
		Root:     cfg.RootFS,
	}, logger)}
}

func (c *loginsCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	logins, gaps, err := c.follower.Poll(ctx)
	for _, g := range gaps {
		n.add(g.Part, g.Reason)
	}
	if err != nil {
		return err
	}
	out.Logins = logins
	return nil
}
