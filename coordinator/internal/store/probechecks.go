package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProbeCheck is one vantage point's latest check of a resource, as the
// replica that received it recorded it. Replicas sharing a store each hear
// the checks of the agents they hold and write them here; every replica
// reads them all, so that each judges a resource from every vantage point
// and the leader's judgement (incidents) covers the whole fleet.
type ProbeCheck struct {
	Resource, From string
	// Replica is the replica that recorded the check.
	Replica  string
	Status   string // ok or failed
	Troubled bool
	// Failures counts the failed checks in a row; FirstFail is the first
	// of them, so that a replica taking the vantage point over carries on
	// counting.
	Failures    int
	FirstFail   time.Time
	Reason      string
	Latency     time.Duration
	CheckedAt   time.Time
	Metrics     map[string]float64
	TLSNotAfter time.Time
}

// Bounds on a probe check: what an agent sends is cleaned and bounded
// before it gets here; these keep one bad writer from filling the table.
const (
	maxProbeCheckText    = 4096
	maxProbeCheckMetrics = 64
	// ProbeChecksKept is how long a check no one renews is kept: a vantage
	// point no longer assigned, a resource gone from the config.
	ProbeChecksKept = time.Hour
)

// probeChecksTable is the same on both engines. The reason is text (probe
// results are cleaned to valid UTF-8 without control characters before
// they are recorded; checkProbeCheck refuses anything else).
const probeChecksTable = `CREATE TABLE probe_checks (
		resource TEXT NOT NULL,
		vantage TEXT NOT NULL,
		replica TEXT NOT NULL,
		status TEXT NOT NULL,
		troubled BIGINT NOT NULL,
		failures BIGINT NOT NULL,
		first_fail BIGINT NOT NULL,
		reason TEXT NOT NULL,
		latency_us BIGINT NOT NULL,
		checked_at BIGINT NOT NULL,
		metrics TEXT NOT NULL,
		tls_not_after BIGINT NOT NULL,
		PRIMARY KEY (resource, vantage)
	);
	CREATE INDEX probe_checks_at ON probe_checks(checked_at);`

// probeCheckPut keeps the newer of two checks of one vantage point: a
// replica that took an agent over never loses to the one it left.
const probeCheckPut = `INSERT INTO probe_checks(resource, vantage, replica, status, troubled, failures, first_fail, reason, latency_us, checked_at, metrics, tls_not_after)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
		ON CONFLICT(resource, vantage) DO UPDATE SET replica = excluded.replica, status = excluded.status, troubled = excluded.troubled,
			failures = excluded.failures, first_fail = excluded.first_fail, reason = excluded.reason, latency_us = excluded.latency_us,
			checked_at = excluded.checked_at, metrics = excluded.metrics, tls_not_after = excluded.tls_not_after
		WHERE probe_checks.checked_at <= excluded.checked_at`

const probeCheckSelect = `SELECT resource, vantage, replica, status, troubled, failures, first_fail, reason, latency_us, checked_at, metrics, tls_not_after
		FROM probe_checks WHERE checked_at >= $1`

// checkProbeCheck refuses a check that could not have come from a prober.
func checkProbeCheck(c ProbeCheck) error {
	what := fmt.Sprintf("record the check of %q from %q", c.Resource, c.From)
	switch {
	case c.Resource == "" || c.From == "":
		return fmt.Errorf("%s: it needs a resource and a vantage point", what)
	case c.Status != "ok" && c.Status != "failed":
		return fmt.Errorf("%s: status %q is neither ok nor failed", what, c.Status)
	case c.CheckedAt.IsZero():
		return fmt.Errorf("%s: it has no time", what)
	case c.Failures < 0:
		return fmt.Errorf("%s: a negative failure count", what)
	case len(c.Metrics) > maxProbeCheckMetrics:
		return fmt.Errorf("%s: %d metrics, more than %d", what, len(c.Metrics), maxProbeCheckMetrics)
	}
	for _, s := range []string{c.Resource, c.From, c.Replica, c.Reason} {
		if !textOK(s) {
			return fmt.Errorf("%s: a name or reason is not valid UTF-8 text of at most %d bytes", what, maxProbeCheckText)
		}
	}
	for k, v := range c.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: metric %q is not a finite number", what, k)
		}
	}
	return nil
}

// probeCheckArgs checks c and returns probeCheckPut's arguments.
func probeCheckArgs(c ProbeCheck) ([]any, error) {
	if err := checkProbeCheck(c); err != nil {
		return nil, err
	}
	m := c.Metrics
	if m == nil {
		m = map[string]float64{}
	}
	metrics, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	troubled := 0
	if c.Troubled {
		troubled = 1
	}
	return []any{c.Resource, c.From, c.Replica, c.Status, troubled, c.Failures, ms(c.FirstFail), c.Reason,
		c.Latency.Microseconds(), ms(c.CheckedAt), string(metrics), ms(c.TLSNotAfter)}, nil
}

// resource, vantage, replica, status, troubled, failures, first_fail,
// reason, latency_us, checked_at, metrics, tls_not_after.
func scanProbeCheck(scan func(...any) error) (ProbeCheck, error) {
	var c ProbeCheck
	var troubled, failures, firstFail, latency, at, notAfter int64
	var metrics string
	if err := scan(&c.Resource, &c.From, &c.Replica, &c.Status, &troubled, &failures, &firstFail, &c.Reason, &latency, &at, &metrics, &notAfter); err != nil {
		return c, err
	}
	c.Troubled, c.Failures, c.Latency = troubled != 0, int(failures), time.Duration(latency)*time.Microsecond
	c.FirstFail, c.CheckedAt, c.TLSNotAfter = fromMs(firstFail), fromMs(at), fromMs(notAfter)
	if err := json.Unmarshal([]byte(metrics), &c.Metrics); err != nil {
		return c, fmt.Errorf("the stored metrics of the check of %q from %q cannot be read: %w", c.Resource, c.From, err)
	}
	return c, nil
}

func (s *SQLite) PutProbeChecks(ctx context.Context, checks []ProbeCheck, now time.Time) error {
	var bad []error
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, c := range checks {
		args, err := probeCheckArgs(c)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if _, err := tx.ExecContext(ctx, probeCheckPut, args...); err != nil {
			return fmt.Errorf("record the check of %q from %q: %w", c.Resource, c.From, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM probe_checks WHERE checked_at < $1`, ms(now.Add(-ProbeChecksKept))); err != nil {
		return fmt.Errorf("forget old probe checks: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return errors.Join(bad...)
}

func (s *SQLite) ProbeChecks(ctx context.Context, since time.Time) ([]ProbeCheck, error) {
	rows, err := s.db.QueryContext(ctx, probeCheckSelect+` ORDER BY resource, vantage`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("read probe checks: %w", err)
	}
	defer rows.Close()
	return collect(rows, scanProbeCheck)
}

func (p *Postgres) PutProbeChecks(ctx context.Context, checks []ProbeCheck, now time.Time) error {
	var bad []error
	b := &pgx.Batch{}
	var names []string
	for _, c := range checks {
		args, err := probeCheckArgs(c)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		b.Queue(probeCheckPut, args...)
		names = append(names, fmt.Sprintf("record the check of %q from %q", c.Resource, c.From))
	}
	b.Queue(`DELETE FROM probe_checks WHERE checked_at < $1`, ms(now.Add(-ProbeChecksKept)))
	names = append(names, "forget old probe checks")
	if err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		return sendBatch(ctx, tx, b, func(i int) string { return names[i] })
	}); err != nil {
		return err
	}
	return errors.Join(bad...)
}

func (p *Postgres) ProbeChecks(ctx context.Context, since time.Time) ([]ProbeCheck, error) {
	cs, err := pgList(ctx, p, scanProbeCheck, probeCheckSelect+` ORDER BY resource COLLATE "C", vantage COLLATE "C"`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("read probe checks: %w", err)
	}
	return cs, nil
}
