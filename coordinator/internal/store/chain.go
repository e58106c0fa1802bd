package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The audit log is one hash chain in insertion (seq) order: each row
// carries the hash of the row before it (prev_hash, "" for the first) and
// its own hash over that and its fields. Altering a row breaks its hash;
// removing or inserting one breaks the next row's prev_hash. Someone who
// can write the database can still recompute the whole chain after the
// row they alter: the chain detects tampering only when its last hash is
// also kept outside the database (see docs/security.md).

// auditChainV1 starts every encoding, so that a later encoding never
// produces the same bytes for different rows.
const auditChainV1 = "gridcity audit chain v1"

// lockAuditChain ("gcAU", second key 0) serializes appends to the chain
// across replicas: each reads the last hash and inserts after it while
// holding it, so no two rows link to the same predecessor.
const lockAuditChain int32 = 0x67634155

// AuditHash is the hex SHA-256 of a row's canonical encoding: the version,
// then prev, request id, step, actor and detail each prefixed by its
// length as 8 bytes big-endian, and the time (unix ms) as 8 bytes, so that
// no bytes can move from one field to the next.
func AuditHash(prev string, atMs int64, requestID, step, actor string, detail []byte) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(auditChainV1))
	field([]byte(prev))
	binary.BigEndian.PutUint64(n[:], uint64(atMs))
	h.Write(n[:])
	field([]byte(requestID))
	field([]byte(step))
	field([]byte(actor))
	field(detail)
	return hex.EncodeToString(h.Sum(nil))
}

// ChainedAudit is an audit row as the chain sees it.
type ChainedAudit struct {
	AuditEntry
	AtMs     int64 // the stored time, which the hash covers
	PrevHash string
	Hash     string
}

const chainPage = 500

const sqlChainPage = `SELECT seq, at, request_id, step, actor, detail, prev_hash, hash FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`

func scanChained(scan func(...any) error) (ChainedAudit, error) {
	var c ChainedAudit
	err := scan(&c.Seq, &c.AtMs, &c.RequestID, &c.Step, &c.Actor, &c.Detail, &c.PrevHash, &c.Hash)
	c.At = fromMs(c.AtMs)
	return c, err
}

// AuditChain calls fn with every audit row in seq order, a page at a
// time, so that a long log is read in bounded memory.
func (s *SQLite) AuditChain(ctx context.Context, fn func(ChainedAudit) error) error {
	return eachChainPage(ctx, fn, func(after int64) ([]ChainedAudit, error) {
		rows, err := s.db.QueryContext(ctx, sqlChainPage, after, chainPage)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return collect(rows, scanChained)
	})
}

// AuditChain calls fn with every audit row in seq order, a page at a time.
func (p *Postgres) AuditChain(ctx context.Context, fn func(ChainedAudit) error) error {
	return eachChainPage(ctx, fn, func(after int64) ([]ChainedAudit, error) {
		return pgList(ctx, p, scanChained, sqlChainPage, after, chainPage)
	})
}

func eachChainPage(ctx context.Context, fn func(ChainedAudit) error, page func(after int64) ([]ChainedAudit, error)) error {
	var after int64
	for {
		rows, err := page(after)
		if err != nil {
			return fmt.Errorf("read audit chain after row %d: %w", after, err)
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
			after = r.Seq
		}
		if len(rows) < chainPage {
			return nil
		}
	}
}

// appendChainSQLite appends steps to the chain inside tx: SQLite's one
// writer means nothing can append between the read of the last hash and
// the inserts.
func appendChainSQLite(ctx context.Context, tx *sql.Tx, steps ...AuditEntry) error {
	var prev string
	err := tx.QueryRowContext(ctx, `SELECT hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read the audit chain's last hash: %w", err)
	}
	for _, e := range steps {
		h := AuditHash(prev, ms(e.At), e.RequestID, e.Step, e.Actor, nonNil(e.Detail))
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit(at, request_id, step, actor, detail, prev_hash, hash) VALUES (?,?,?,?,?,?,?)`,
			ms(e.At), e.RequestID, e.Step, e.Actor, nonNil(e.Detail), prev, h); err != nil {
			return fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
		}
		prev = h
	}
	return nil
}

// appendChainPostgres appends steps to the chain inside tx under the
// chain's lock, held until tx ends. Callers take it after their other
// writes: a transaction holding the chain lock then waits for nothing
// else, so the lock cannot close a deadlock with a row lock.
func appendChainPostgres(ctx context.Context, tx pgx.Tx, steps ...AuditEntry) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockAuditChain); err != nil {
		return fmt.Errorf("wait for the audit chain lock: %w", err)
	}
	var prev string
	err := tx.QueryRow(ctx, `SELECT hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read the audit chain's last hash: %w", err)
	}
	b := &pgx.Batch{}
	for _, e := range steps {
		h := AuditHash(prev, ms(e.At), e.RequestID, e.Step, e.Actor, nonNil(e.Detail))
		b.Queue(`INSERT INTO audit(at, request_id, step, actor, detail, prev_hash, hash) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
			ms(e.At), e.RequestID, e.Step, e.Actor, nonNil(e.Detail), prev, h)
		prev = h
	}
	return sendBatch(ctx, tx, b, func(i int) string {
		return fmt.Sprintf("write audit row (%s %s)", steps[i].Step, steps[i].RequestID)
	})
}

// auditChainColumns is SQLite migration 15 and PostgreSQL migration 9.
// SQL cannot compute SHA-256 in SQLite, so the rows written before it are
// chained in Go by backfillAuditChain, in the migration's transaction.
const auditChainColumns = `ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';`

// chainRow is what the backfill reads of a row.
type chainRow struct {
	seq                    int64
	at                     int64
	requestID, step, actor string
	detail                 []byte
}

// backfillAuditChain links every row written before the chain, in seq
// order, a page at a time. read returns rows with seq > after; update
// stores one row's links.
func backfillAuditChain(read func(after int64) ([]chainRow, error), update func(seq int64, prev, hash string) error) error {
	var after int64
	prev := ""
	for {
		rows, err := read(after)
		if err != nil {
			return fmt.Errorf("chain the audit log: %w", err)
		}
		for _, r := range rows {
			h := AuditHash(prev, r.at, r.requestID, r.step, r.actor, r.detail)
			if err := update(r.seq, prev, h); err != nil {
				return fmt.Errorf("chain audit row %d: %w", r.seq, err)
			}
			prev, after = h, r.seq
		}
		if len(rows) < chainPage {
			return nil
		}
	}
}

const sqlBackfillPage = `SELECT seq, at, request_id, step, actor, detail FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`

func scanChainRow(scan func(...any) error) (chainRow, error) {
	var r chainRow
	err := scan(&r.seq, &r.at, &r.requestID, &r.step, &r.actor, &r.detail)
	return r, err
}

func backfillSQLite(ctx context.Context, tx *sql.Tx) error {
	return backfillAuditChain(func(after int64) ([]chainRow, error) {
		rows, err := tx.QueryContext(ctx, sqlBackfillPage, after, chainPage)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return collect(rows, scanChainRow)
	}, func(seq int64, prev, hash string) error {
		_, err := tx.ExecContext(ctx, `UPDATE audit SET prev_hash = ?, hash = ? WHERE seq = ?`, prev, hash, seq)
		return err
	})
}

func backfillPostgres(ctx context.Context, tx pgx.Tx) error {
	return backfillAuditChain(func(after int64) ([]chainRow, error) {
		rows, err := tx.Query(ctx, sqlBackfillPage, after, chainPage)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return collect(rows, scanChainRow)
	}, func(seq int64, prev, hash string) error {
		_, err := tx.Exec(ctx, `UPDATE audit SET prev_hash = $1, hash = $2 WHERE seq = $3`, prev, hash, seq)
		return err
	})
}

// ChainFailure is the first audit row whose link does not hold.
type ChainFailure struct {
	Seq       int64  `json:"seq"`
	RequestID string `json:"requestId"`
	Step      string `json:"step"`
	At        string `json:"at"`
	Reason    string `json:"reason"`
}

// ChainReport is what VerifyAuditChain found.
type ChainReport struct {
	OK           bool          `json:"ok"`
	Entries      int64         `json:"entries"`
	LastHash     string        `json:"lastHash"`
	FirstFailure *ChainFailure `json:"firstFailure,omitempty"`
}

// AuditChainReader is the one read VerifyAuditChain needs.
type AuditChainReader interface {
	AuditChain(ctx context.Context, fn func(ChainedAudit) error) error
}

// errStopChain ends the walk at the first failure.
var errStopChain = errors.New("stop")

// VerifyAuditChain recomputes every link of the audit chain and stops at
// the first row that fails: a hash that does not match its row means the
// row was altered; a prev_hash that is not the previous row's hash means
// a row before it was removed or inserted. check, when set, is asked of
// every row whose links hold and fails it by returning a reason (the
// approvals' authenticators, which this package cannot check).
func VerifyAuditChain(ctx context.Context, r AuditChainReader, check func(ChainedAudit) (reason string, err error)) (ChainReport, error) {
	var rep ChainReport
	prev := ""
	err := r.AuditChain(ctx, func(c ChainedAudit) error {
		reason := ""
		switch {
		case c.PrevHash != prev:
			reason = fmt.Sprintf("prev_hash %s is not the previous entry's hash %s: an entry before it was removed or inserted", short(c.PrevHash), short(prev))
		case AuditHash(c.PrevHash, c.AtMs, c.RequestID, c.Step, c.Actor, c.Detail) != c.Hash:
			reason = "hash mismatch: the entry was altered after it was written"
		case check != nil:
			var err error
			if reason, err = check(c); err != nil {
				return err
			}
		}
		if reason != "" {
			rep.FirstFailure = &ChainFailure{Seq: c.Seq, RequestID: c.RequestID, Step: c.Step, At: c.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Reason: reason}
			return errStopChain
		}
		rep.Entries++
		rep.LastHash, prev = c.Hash, c.Hash
		return nil
	})
	if err != nil && !errors.Is(err, errStopChain) {
		return rep, err
	}
	rep.OK = rep.FirstFailure == nil
	return rep, nil
}

func short(h string) string {
	if h == "" {
		return `""`
	}
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}
