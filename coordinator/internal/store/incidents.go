package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

func (s *SQLite) OpenIncident(ctx context.Context, in Incident) (int64, error) {
	explains, err := newIncident(in)
	if err != nil {
		return 0, err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO incidents(target, kind, reason, started_at, explains) VALUES (?,?,?,?,?)`,
		in.Target, in.Kind, in.Reason, ms(in.StartedAt), explains)
	if err != nil {
		var n int
		if qerr := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM incidents WHERE target = ? AND ended_at = 0`, in.Target).Scan(&n); qerr == nil && n > 0 {
			return 0, fmt.Errorf("record incident on %s: %w: it has an open incident", in.Target, ErrExists)
		}
		return 0, fmt.Errorf("record incident on %s: %w", in.Target, err)
	}
	return res.LastInsertId()
}

func (s *SQLite) UpdateIncident(ctx context.Context, id int64, reason string, explains []string) error {
	ex, err := explainsJSON(explains)
	if err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE incidents SET reason = ?, explains = ? WHERE id = ? AND ended_at = 0`, reason, ex, id)
	if err != nil {
		return fmt.Errorf("update incident %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("update incident %d: %w (or it has ended)", id, ErrNotFound)
	}
	return nil
}

func (s *SQLite) EndIncident(ctx context.Context, id int64, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("end incident %d: no end time", id)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE incidents SET ended_at = MAX(?, started_at) WHERE id = ? AND ended_at = 0`, ms(at), id)
	if err != nil {
		return fmt.Errorf("end incident %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("end incident %d: %w (or it has ended)", id, ErrNotFound)
	}
	return nil
}

func (s *SQLite) OpenIncidents(ctx context.Context) ([]Incident, error) {
	return s.incidents(ctx, `WHERE ended_at = 0 ORDER BY started_at, id`)
}

func (s *SQLite) Incidents(ctx context.Context, limit int) ([]Incident, error) {
	return s.incidents(ctx, `ORDER BY started_at DESC, id DESC LIMIT ?`, limit)
}

func (s *SQLite) incidents(ctx context.Context, rest string, args ...any) ([]Incident, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, target, kind, reason, started_at, ended_at, explains FROM incidents `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return incidentsOrEmpty(collect(rows, scanIncident))
}

// newIncident checks an incident to open and returns its explains as JSON.
func newIncident(in Incident) (string, error) {
	if in.Target == "" {
		return "", errors.New("record incident: it has no target")
	}
	if in.StartedAt.IsZero() {
		return "", fmt.Errorf("record incident on %s: it has no start", in.Target)
	}
	return explainsJSON(in.Explains)
}

func explainsJSON(explains []string) (string, error) {
	if explains == nil {
		explains = []string{}
	}
	b, err := json.Marshal(explains)
	return string(b), err
}
