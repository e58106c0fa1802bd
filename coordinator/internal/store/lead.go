package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lead campaigns for the leadership of the replicas sharing this store
// until ctx ends, calling leading(true) when this process becomes the
// leader and leading(false) when it stops being one. The leader is whoever
// holds a session-level advisory lock ("gcLD" in pg_locks) on a connection
// of its own: PostgreSQL releases it the moment that session ends, so when
// a leader dies (its socket closes) or its session is terminated, another
// replica takes the lock at its next try, every interval.
//
// The leader checks its session every interval too, and steps down as soon
// as a check fails or takes longer than interval: a leader cut off from
// the database stops leading before the database gives up on its session.
// Two replicas may both believe they lead for at most one interval (the
// old one has not checked yet); what the leader writes is guarded in the
// store as well (an incident opens once per target).
func (p *Postgres) Lead(ctx context.Context, interval time.Duration, logger *slog.Logger, leading func(bool)) {
	cfg := p.pool.pool.Config().ConnConfig.Copy()
	wait := interval
	for ctx.Err() == nil {
		led, err := p.leadOnce(ctx, cfg, interval, leading)
		if ctx.Err() != nil {
			return
		}
		if led {
			wait = interval
		}
		logger.Warn("lost the connection that campaigns for leadership; trying again", "retry_in", wait, "err", p.pool.classify(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// leadOnce campaigns on one connection until it fails or ctx ends; led
// says whether it held the lock at some point.
func (p *Postgres) leadOnce(ctx context.Context, cfg *pgx.ConnConfig, interval time.Duration, leading func(bool)) (led bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	held := false
	defer func() {
		if held {
			leading(false)
		}
		// Closing the session releases the lock, if it is still ours.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, interval)
		if held {
			// Still our session, and the database answers in time.
			_, err = conn.Exec(qctx, `SELECT 1`)
		} else {
			var got bool
			err = conn.QueryRow(qctx, `SELECT pg_try_advisory_lock($1, 0)`, lockLeader).Scan(&got)
			if err == nil && got {
				held, led = true, true
				leading(true)
			}
		}
		cancel()
		if err != nil {
			return led, err
		}
		select {
		case <-ctx.Done():
			return led, nil
		case <-tick.C:
		}
	}
}
