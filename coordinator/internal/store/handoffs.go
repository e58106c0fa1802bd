package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Errors of the conditional request writes.
var (
	// ErrConflict is a change of a request whose stored status is no
	// longer the one the change was made from: another coordinator (or
	// another step on this one) changed it first. Nothing was written.
	ErrConflict = errors.New("the request changed meanwhile")
	// ErrTooMany is a new request refused because its token already has
	// as many waiting as allowed. Nothing was written.
	ErrTooMany = errors.New("too many requests of this token are waiting")
)

// RequestsChannel is the PostgreSQL notification channel on which every
// change of a request is announced, with the request's id as payload
// (nothing secret): the replicas re-read the request from the store.
const RequestsChannel = "gridcity_requests"

// Handoff is an approved command's secrets (the input and the sudo
// password the approver typed) sealed to the one replica that holds its
// server's stream, which alone can open them and dispatch it. It lives
// while the request is approved: any change of the request out of
// "approved" deletes it.
type Handoff struct {
	RequestID string
	Replica   string // the replica it is sealed to
	Sealed    []byte
	CreatedAt time.Time
	// Auth is the hand-off's authenticator, made with the unseal key
	// (which the store never holds) over the request, the replica and
	// Sealed: the replica checks it before it dispatches anything.
	Auth []byte
}

// Migrations of both engines: the hand-off rows, and each replica's
// public hand-off key beside its addresses.
const (
	handoffsSQLite = `CREATE TABLE handoffs (
		request_id TEXT PRIMARY KEY,
		replica TEXT NOT NULL,
		sealed BLOB NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX handoffs_replica ON handoffs(replica);
	ALTER TABLE replicas ADD COLUMN handoff_key BLOB NOT NULL DEFAULT x'';`
	handoffsPostgres = `CREATE TABLE handoffs (
		request_id TEXT PRIMARY KEY,
		replica TEXT NOT NULL,
		sealed BYTEA NOT NULL,
		created_at BIGINT NOT NULL
	);
	CREATE INDEX handoffs_replica ON handoffs(replica);
	ALTER TABLE replicas ADD COLUMN handoff_key BYTEA NOT NULL DEFAULT ''::bytea;`

	// Each hand-off's authenticator. A hand-off from before it has none,
	// and is refused: nothing runs, the request fails.
	handoffAuthSQLite   = `ALTER TABLE handoffs ADD COLUMN auth BLOB NOT NULL DEFAULT x'';`
	handoffAuthPostgres = `ALTER TABLE handoffs ADD COLUMN auth BYTEA NOT NULL DEFAULT ''::bytea;`
)

func checkSwap(expect string, r RequestRecord, h *Handoff, steps []AuditEntry) error {
	switch {
	case len(steps) == 0:
		return fmt.Errorf("save request %s: no audit row records the change; every change of a request is audited", r.ID)
	case expect == "":
		return fmt.Errorf("save request %s: no status to change it from", r.ID)
	case h != nil && (r.Status != "approved" || h.RequestID != r.ID || h.Replica == ""):
		return fmt.Errorf("save request %s: a hand-off goes with an approval of the same request to a replica (got status %s, hand-off of %q to %q)", r.ID, r.Status, h.RequestID, h.Replica)
	}
	return nil
}

func conflict(r RequestRecord, expect, found string) error {
	return fmt.Errorf("save request %s as %s: %w: it is %s, not %s", r.ID, r.Status, ErrConflict, found, expect)
}

func tooMany(token string, n int) error {
	return fmt.Errorf("record a request of token %q: %w (%d)", token, ErrTooMany, n)
}

// handoff columns: request_id, replica, sealed, created_at, auth.
func scanHandoff(scan func(...any) error) (Handoff, error) {
	var h Handoff
	var created int64
	err := scan(&h.RequestID, &h.Replica, &h.Sealed, &created, &h.Auth)
	h.CreatedAt = fromMs(created)
	return h, err
}

const (
	sqlInsertRequest = `INSERT INTO requests(id, server, token, status, created_at, body) VALUES (?,?,?,?,?,?)`
	sqlPending       = `SELECT COUNT(*) FROM requests WHERE token = ? AND status = 'pending' AND created_at > ?`
)

func (s *SQLite) SwapRequestAudited(ctx context.Context, expect string, r RequestRecord, h *Handoff, steps ...AuditEntry) error {
	if err := checkSwap(expect, r, h, steps); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var cur string
	err = tx.QueryRowContext(ctx, `SELECT status FROM requests WHERE id = ?`, r.ID).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("save request %s: %w", r.ID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("save request %s: %w", r.ID, err)
	case cur != expect:
		return conflict(r, expect, cur)
	}
	if err := appendChainSQLite(ctx, tx, steps...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE requests SET status = ?, body = ? WHERE id = ?`, r.Status, nonNil(r.Body), r.ID); err != nil {
		return fmt.Errorf("save request %s (%s): %w", r.ID, r.Status, err)
	}
	if err := s.placeHandoff(ctx, tx, r, h); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *SQLite) placeHandoff(ctx context.Context, tx *sql.Tx, r RequestRecord, h *Handoff) error {
	var err error
	if h != nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO handoffs(request_id, replica, sealed, created_at, auth) VALUES (?,?,?,?,?)
			ON CONFLICT(request_id) DO UPDATE SET replica = excluded.replica, sealed = excluded.sealed, created_at = excluded.created_at, auth = excluded.auth`,
			h.RequestID, h.Replica, nonNil(h.Sealed), ms(h.CreatedAt), nonNil(h.Auth))
	} else if r.Status != "approved" {
		_, err = tx.ExecContext(ctx, `DELETE FROM handoffs WHERE request_id = ?`, r.ID)
	}
	if err != nil {
		return fmt.Errorf("hand-off of request %s: %w", r.ID, err)
	}
	return nil
}

func (s *SQLite) CreateRequestLimited(ctx context.Context, r RequestRecord, limit int, since time.Time, steps ...AuditEntry) (int, error) {
	if len(steps) == 0 {
		return 0, fmt.Errorf("record request %s: no audit row records it; every change of a request is audited", r.ID)
	}
	// One writer: the count and the insert see the rows as they are.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, sqlPending, r.Token, ms(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count requests of token %q: %w", r.Token, err)
	}
	if n >= limit {
		return n, tooMany(r.Token, n)
	}
	if err := appendChainSQLite(ctx, tx, steps...); err != nil {
		return n, err
	}
	if _, err := tx.ExecContext(ctx, sqlInsertRequest, r.ID, r.Server, r.Token, r.Status, ms(r.CreatedAt), nonNil(r.Body)); err != nil {
		return n, fmt.Errorf("record request %s: %w", r.ID, err)
	}
	return n, tx.Commit()
}

func (s *SQLite) Handoffs(ctx context.Context, replica string) ([]Handoff, error) {
	q, args := `SELECT request_id, replica, sealed, created_at, auth FROM handoffs`, []any{}
	if replica != "" {
		q, args = q+` WHERE replica = ?`, append(args, replica)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, request_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read hand-offs: %w", err)
	}
	defer rows.Close()
	return collect(rows, scanHandoff)
}

func (p *Postgres) SwapRequestAudited(ctx context.Context, expect string, r RequestRecord, h *Handoff, steps ...AuditEntry) error {
	if err := checkSwap(expect, r, h, steps); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// The row lock the update takes orders two replicas' changes: the
		// second sees the first's status and changes nothing.
		tag, err := tx.Exec(ctx, `UPDATE requests SET status = $1, body = $2 WHERE id = $3 AND status = $4`, r.Status, nonNil(r.Body), r.ID, expect)
		if err != nil {
			return fmt.Errorf("save request %s (%s): %w", r.ID, r.Status, err)
		}
		if tag.RowsAffected() == 0 {
			var cur string
			err := tx.QueryRow(ctx, `SELECT status FROM requests WHERE id = $1`, r.ID).Scan(&cur)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("save request %s: %w", r.ID, ErrNotFound)
			} else if err != nil {
				return fmt.Errorf("save request %s: %w", r.ID, err)
			}
			return conflict(r, expect, cur)
		}
		b := &pgx.Batch{}
		if h != nil {
			b.Queue(`INSERT INTO handoffs(request_id, replica, sealed, created_at, auth) VALUES ($1,$2,$3,$4,$5)
				ON CONFLICT(request_id) DO UPDATE SET replica = excluded.replica, sealed = excluded.sealed, created_at = excluded.created_at, auth = excluded.auth`,
				h.RequestID, h.Replica, nonNil(h.Sealed), ms(h.CreatedAt), nonNil(h.Auth))
		} else if r.Status != "approved" {
			b.Queue(`DELETE FROM handoffs WHERE request_id = $1`, r.ID)
		}
		// Delivered when the transaction commits, never before.
		b.Queue(`SELECT pg_notify($1, $2)`, RequestsChannel, r.ID)
		if err := sendBatch(ctx, tx, b, func(int) string { return fmt.Sprintf("hand-off and notice of request %s", r.ID) }); err != nil {
			return err
		}
		// The chain's lock last, after the request's row lock.
		return appendChainPostgres(ctx, tx, steps...)
	})
}

func (p *Postgres) CreateRequestLimited(ctx context.Context, r RequestRecord, limit int, since time.Time, steps ...AuditEntry) (int, error) {
	if len(steps) == 0 {
		return 0, fmt.Errorf("record request %s: no audit row records it; every change of a request is audited", r.ID)
	}
	var n int
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// One count-and-insert per token at a time, on every replica:
		// without it each could count below the limit and all insert.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockRequests, r.Token); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM requests WHERE token = $1 AND status = 'pending' AND created_at > $2`, r.Token, ms(since)).Scan(&n); err != nil {
			return fmt.Errorf("count requests of token %q: %w", r.Token, err)
		}
		if n >= limit {
			return tooMany(r.Token, n)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO requests(id, server, token, status, created_at, body) VALUES ($1,$2,$3,$4,$5,$6)`, r.ID, r.Server, r.Token, r.Status, ms(r.CreatedAt), nonNil(r.Body))
		b.Queue(`SELECT pg_notify($1, $2)`, RequestsChannel, r.ID)
		if err := sendBatch(ctx, tx, b, func(int) string { return fmt.Sprintf("record request %s", r.ID) }); err != nil {
			return err
		}
		// The chain's lock last, after the request's row.
		return appendChainPostgres(ctx, tx, steps...)
	})
	return n, err
}

func (p *Postgres) Handoffs(ctx context.Context, replica string) ([]Handoff, error) {
	q, args := `SELECT request_id, replica, sealed, created_at, auth FROM handoffs`, []any{}
	if replica != "" {
		q, args = q+` WHERE replica = $1`, append(args, replica)
	}
	hs, err := pgList(ctx, p, scanHandoff, q+` ORDER BY created_at, request_id COLLATE "C"`, args...)
	if err != nil {
		return nil, fmt.Errorf("read hand-offs: %w", err)
	}
	return hs, nil
}

// Listen calls f with the payload of every notification on channel until
// ctx ends, on a connection of its own that it opens again (within a few
// seconds) whenever it breaks. After each (re)connect it calls f with ""
// first: notifications sent while it was not listening are lost, so the
// caller re-reads what it follows from the store.
func (p *Postgres) Listen(ctx context.Context, channel string, logger *slog.Logger, f func(payload string)) {
	cfg := p.pool.pool.Config().ConnConfig.Copy()
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.listenOnce(ctx, cfg, channel, func(payload string) {
			wait = 100 * time.Millisecond // it worked: the next failure retries soon
			f(payload)
		})
		if ctx.Err() != nil {
			return
		}
		logger.Warn("lost the store's notifications; listening again (until then, changes made by other replicas arrive at the periodic re-read)", "channel", channel, "retry_in", wait, "err", p.pool.classify(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (p *Postgres) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, channel string, f func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	f("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		f(n.Payload)
	}
}
