package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// ProbeAsk is one replica asking the replica that holds a server's agent
// stream for a probe from that agent now (diagnose's attempts from the
// servers that use a target): the asker cannot reach the agent, the
// holder can. The holder runs it and writes the answer into the same row;
// the asker reads it and forgets the row. Nothing in it is secret: an
// engine and a target from the coordinator's config and topology, and a
// check result cleaned and bounded by the holder.
type ProbeAsk struct {
	ID      string
	Server  string // whose agent probes
	Replica string // the replica asked: the holder of Server's stream
	Engine  string
	Target  string
	Timeout time.Duration
	AskedAt time.Time
	// The answer, once given (Answered).
	Answered bool
	// Status is ok or failed as the probe found the target, or
	// unanswered when the agent gave no answer (Reason says why).
	Status  string
	Reason  string
	Latency time.Duration
	Metrics map[string]float64
}

// ProbesChannel is the PostgreSQL notification channel for asks and
// answers: "ask:REPLICA" when an ask for REPLICA is written, "answer:ID"
// when ask ID is answered. The store is the truth: a lost notification
// delays an answer until the next re-read.
const ProbesChannel = "gridcity_probes"

// ProbeAsksKept is how long an ask no one forgot is kept: its asker died
// before reading the answer. An answer is worth nothing after seconds.
const ProbeAsksKept = 10 * time.Minute

// probeAsksTable is the same on both engines.
const probeAsksTable = `CREATE TABLE probe_asks (
		id TEXT PRIMARY KEY,
		server TEXT NOT NULL,
		replica TEXT NOT NULL,
		engine TEXT NOT NULL,
		target TEXT NOT NULL,
		timeout_ms BIGINT NOT NULL,
		asked_at BIGINT NOT NULL,
		answered BIGINT NOT NULL,
		status TEXT NOT NULL,
		reason TEXT NOT NULL,
		latency_us BIGINT NOT NULL,
		metrics TEXT NOT NULL
	);
	CREATE INDEX probe_asks_replica ON probe_asks(replica, answered);
	CREATE INDEX probe_asks_at ON probe_asks(asked_at);`

const (
	probeAskInsert = `INSERT INTO probe_asks(id, server, replica, engine, target, timeout_ms, asked_at, answered, status, reason, latency_us, metrics)
		VALUES ($1,$2,$3,$4,$5,$6,$7,0,'','',0,'{}')`
	probeAskForget = `DELETE FROM probe_asks WHERE asked_at < $1`
	probeAskSelect = `SELECT id, server, replica, engine, target, timeout_ms, asked_at, answered, status, reason, latency_us, metrics FROM probe_asks`
	probeAskAnswer = `UPDATE probe_asks SET answered = 1, status = $1, reason = $2, latency_us = $3, metrics = $4 WHERE id = $5 AND answered = 0`
)

// textOK is a name or reason fit to store: valid UTF-8 without NUL, at
// most maxProbeCheckText bytes.
func textOK(s string) bool {
	return len(s) <= maxProbeCheckText && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

func checkProbeAsk(a ProbeAsk) error {
	what := fmt.Sprintf("ask replica %q for a probe from %q", a.Replica, a.Server)
	switch {
	case a.ID == "" || a.Server == "" || a.Replica == "" || a.Engine == "" || a.Target == "":
		return fmt.Errorf("%s: it needs an id, a server, a replica, an engine and a target", what)
	case a.Timeout <= 0 || a.AskedAt.IsZero():
		return fmt.Errorf("%s: it needs a timeout and a time", what)
	}
	for _, s := range []string{a.ID, a.Server, a.Replica, a.Engine, a.Target} {
		if !textOK(s) {
			return fmt.Errorf("%s: a name is not valid UTF-8 text of at most %d bytes", what, maxProbeCheckText)
		}
	}
	return nil
}

// probeAnswerArgs checks a's answer and returns probeAskAnswer's arguments.
func probeAnswerArgs(a ProbeAsk) ([]any, error) {
	what := fmt.Sprintf("answer probe ask %q", a.ID)
	switch {
	case a.Status != "ok" && a.Status != "failed" && a.Status != "unanswered":
		return nil, fmt.Errorf("%s: status %q is not ok, failed or unanswered", what, a.Status)
	case !textOK(a.Reason):
		return nil, fmt.Errorf("%s: the reason is not valid UTF-8 text of at most %d bytes", what, maxProbeCheckText)
	case a.Latency < 0:
		return nil, fmt.Errorf("%s: a negative latency", what)
	case len(a.Metrics) > maxProbeCheckMetrics:
		return nil, fmt.Errorf("%s: %d metrics, more than %d", what, len(a.Metrics), maxProbeCheckMetrics)
	}
	m := a.Metrics
	if m == nil {
		m = map[string]float64{}
	}
	for k, v := range m {
		if !textOK(k) || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: metric %q is not a finite number with a name of valid text", what, k)
		}
	}
	metrics, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return []any{a.Status, a.Reason, a.Latency.Microseconds(), string(metrics), a.ID}, nil
}

func scanProbeAsk(scan func(...any) error) (ProbeAsk, error) {
	var a ProbeAsk
	var timeout, at, answered, latency int64
	var metrics string
	if err := scan(&a.ID, &a.Server, &a.Replica, &a.Engine, &a.Target, &timeout, &at, &answered, &a.Status, &a.Reason, &latency, &metrics); err != nil {
		return a, err
	}
	a.Timeout, a.AskedAt, a.Answered = time.Duration(timeout)*time.Millisecond, fromMs(at), answered != 0
	a.Latency = time.Duration(latency) * time.Microsecond
	if err := json.Unmarshal([]byte(metrics), &a.Metrics); err != nil {
		return a, fmt.Errorf("the stored metrics of probe ask %q cannot be read: %w", a.ID, err)
	}
	return a, nil
}

func probeAskArgs(a ProbeAsk) []any {
	return []any{a.ID, a.Server, a.Replica, a.Engine, a.Target, a.Timeout.Milliseconds(), ms(a.AskedAt)}
}

func (s *SQLite) AskProbe(ctx context.Context, a ProbeAsk) error {
	if err := checkProbeAsk(a); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, probeAskForget, ms(a.AskedAt.Add(-ProbeAsksKept))); err != nil {
		return fmt.Errorf("forget old probe asks: %w", err)
	}
	if _, err := tx.ExecContext(ctx, probeAskInsert, probeAskArgs(a)...); err != nil {
		return fmt.Errorf("ask replica %s for a probe from %s: %w", a.Replica, a.Server, err)
	}
	return tx.Commit()
}

func (s *SQLite) ProbeAsks(ctx context.Context, replica string) ([]ProbeAsk, error) {
	rows, err := s.db.QueryContext(ctx, probeAskSelect+` WHERE replica = $1 AND answered = 0 ORDER BY asked_at, id`, replica)
	if err != nil {
		return nil, fmt.Errorf("read the probes asked of replica %s: %w", replica, err)
	}
	defer rows.Close()
	return collect(rows, scanProbeAsk)
}

func (s *SQLite) AnswerProbe(ctx context.Context, a ProbeAsk) error {
	args, err := probeAnswerArgs(a)
	if err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, probeAskAnswer, args...)
	if err != nil {
		return fmt.Errorf("answer probe ask %s: %w", a.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("answer probe ask %s: %w (its asker gave up, or it was answered)", a.ID, ErrNotFound)
	}
	return nil
}

func (s *SQLite) ProbeAnswer(ctx context.Context, id string) (ProbeAsk, error) {
	a, err := scanProbeAsk(s.db.QueryRowContext(ctx, probeAskSelect+` WHERE id = $1`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("probe ask %s: %w", id, ErrNotFound)
	}
	return a, err
}

func (s *SQLite) ForgetProbeAsk(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM probe_asks WHERE id = $1`, id); err != nil {
		return fmt.Errorf("forget probe ask %s: %w", id, err)
	}
	return nil
}

func (p *Postgres) AskProbe(ctx context.Context, a ProbeAsk) error {
	if err := checkProbeAsk(a); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(probeAskForget, ms(a.AskedAt.Add(-ProbeAsksKept)))
	b.Queue(probeAskInsert, probeAskArgs(a)...)
	b.Queue(`SELECT pg_notify($1, $2)`, ProbesChannel, "ask:"+a.Replica)
	names := []string{"forget old probe asks", fmt.Sprintf("ask replica %s for a probe from %s", a.Replica, a.Server), "announce the ask"}
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		return sendBatch(ctx, tx, b, func(i int) string { return names[i] })
	})
}

func (p *Postgres) ProbeAsks(ctx context.Context, replica string) ([]ProbeAsk, error) {
	as, err := pgList(ctx, p, scanProbeAsk, probeAskSelect+` WHERE replica = $1 AND answered = 0 ORDER BY asked_at, id COLLATE "C"`, replica)
	if err != nil {
		return nil, fmt.Errorf("read the probes asked of replica %s: %w", replica, err)
	}
	return as, nil
}

func (p *Postgres) AnswerProbe(ctx context.Context, a ProbeAsk) error {
	args, err := probeAnswerArgs(a)
	if err != nil {
		return err
	}
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, probeAskAnswer, args...)
		if err != nil {
			return fmt.Errorf("answer probe ask %s: %w", a.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("answer probe ask %s: %w (its asker gave up, or it was answered)", a.ID, ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ProbesChannel, "answer:"+a.ID); err != nil {
			return fmt.Errorf("announce the answer to probe ask %s: %w", a.ID, err)
		}
		return nil
	})
}

func (p *Postgres) ProbeAnswer(ctx context.Context, id string) (ProbeAsk, error) {
	a, err := scanProbeAsk(p.pool.QueryRow(ctx, probeAskSelect+` WHERE id = $1`, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("probe ask %s: %w", id, ErrNotFound)
	}
	return a, err
}

func (p *Postgres) ForgetProbeAsk(ctx context.Context, id string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM probe_asks WHERE id = $1`, id); err != nil {
		return fmt.Errorf("forget probe ask %s: %w", id, err)
	}
	return nil
}
