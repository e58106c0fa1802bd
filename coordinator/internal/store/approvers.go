package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

func (s *SQLite) CreateApprover(ctx context.Context, a Approver) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO approvers(name, password_hash, created_at) VALUES (?,?,?)`, a.Name, a.PasswordHash, ms(a.CreatedAt))
	if err != nil {
		if _, gerr := s.Approver(ctx, a.Name); gerr == nil {
			return ErrExists
		}
		return fmt.Errorf("record approver %q: %w", a.Name, err)
	}
	return nil
}

func (s *SQLite) Approver(ctx context.Context, name string) (Approver, error) {
	a := Approver{Name: name}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT password_hash, created_at FROM approvers WHERE name = ?`, name).Scan(&a.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Approver{}, ErrNotFound
	}
	a.CreatedAt = fromMs(created)
	return a, err
}

func (s *SQLite) Approvers(ctx context.Context) ([]Approver, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created_at FROM approvers ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanApprover)
}

func (s *SQLite) SetApproverPassword(ctx context.Context, name, hash string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE approvers SET password_hash = ? WHERE name = ?`, hash, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE approver = ?`, name); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *SQLite) CreateSession(ctx context.Context, se Session) error {
	if len(se.CSRFHash) == 0 {
		return errors.New("record session: it has no CSRF hash")
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO sessions(hash, csrf_hash, approver, created_at, expires_at) VALUES (?,?,?,?,?)`, se.Hash, se.CSRFHash, se.Approver, ms(se.CreatedAt), ms(se.ExpiresAt))
	return err
}

func (s *SQLite) SessionByHash(ctx context.Context, hash []byte, now time.Time) (Session, error) {
	se := Session{Hash: hash}
	var created, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT csrf_hash, approver, created_at, expires_at FROM sessions WHERE hash = ? AND expires_at > ?`, hash, ms(now)).Scan(&se.CSRFHash, &se.Approver, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	se.CreatedAt, se.ExpiresAt = fromMs(created), fromMs(expires)
	return se, err
}

func (s *SQLite) DeleteSession(ctx context.Context, hash []byte) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
	return err
}

func (s *SQLite) SaveRequestAudited(ctx context.Context, r RequestRecord, steps ...AuditEntry) error {
	if len(steps) == 0 {
		return fmt.Errorf("save request %s: no audit row records the change; every change of a request is audited", r.ID)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save request %s: %w", r.ID, err)
	}
	defer tx.Rollback()
	if err := appendChainSQLite(ctx, tx, steps...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO requests(id, server, token, status, created_at, body) VALUES (?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET status = excluded.status, body = excluded.body`, r.ID, r.Server, r.Token, r.Status, ms(r.CreatedAt), r.Body); err != nil {
		return fmt.Errorf("save request %s (%s): %w", r.ID, steps[len(steps)-1].Step, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save request %s (%s): %w", r.ID, steps[len(steps)-1].Step, err)
	}
	return nil
}

func (s *SQLite) CountRequests(ctx context.Context, token, status string, since time.Time) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM requests WHERE token = ? AND status = ? AND created_at > ?`, token, status, ms(since)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count requests of token %q: %w", token, err)
	}
	return n, nil
}

func (s *SQLite) Request(ctx context.Context, id string) (RequestRecord, error) {
	r := RequestRecord{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT server, status, created_at, body FROM requests WHERE id = ?`, id).Scan(&r.Server, &r.Status, &created, &r.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return RequestRecord{}, ErrNotFound
	}
	r.CreatedAt = fromMs(created)
	return r, err
}

func (s *SQLite) Requests(ctx context.Context, limit int, statuses ...string) ([]RequestRecord, error) {
	q := `SELECT id, server, status, created_at, body FROM requests`
	args := []any{}
	if len(statuses) > 0 {
		q += ` WHERE status IN (?` + strings.Repeat(",?", len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, st)
		}
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanRequest)
}

func (s *SQLite) AppendAudit(ctx context.Context, e AuditEntry) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
	}
	defer tx.Rollback()
	if err := appendChainSQLite(ctx, tx, e); err != nil {
		return err
	}
	return tx.Commit()
}

// auditExists says whether a request has an audit row of a step.
const auditExists = `SELECT EXISTS (SELECT 1 FROM audit WHERE request_id = $1 AND step = $2)`

// AppendAuditOnce checks and appends in one transaction of SQLite's single
// writer: nothing can write between its check and its insert.
func (s *SQLite) AppendAuditOnce(ctx context.Context, e AuditEntry) (bool, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, auditExists, e.RequestID, e.Step).Scan(&exists); err != nil {
		return false, fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
	}
	if exists {
		return false, nil
	}
	if err := appendChainSQLite(ctx, tx, e); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
	}
	return true, nil
}

func (s *SQLite) Audit(ctx context.Context, requestID string, limit int) ([]AuditEntry, error) {
	q := `SELECT seq, at, request_id, step, actor, detail FROM audit`
	args := []any{}
	if requestID != "" {
		q += ` WHERE request_id = ?`
		args = append(args, requestID)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanAudit)
}
