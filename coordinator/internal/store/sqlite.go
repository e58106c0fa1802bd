package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gridcity/gridcity/lib/atomicfile"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLite is the embedded engine, one file in the data directory.
//
// Writes go through one connection (w), so that the coordinator's own
// writers queue in Go, first come first served and bounded by their
// context, instead of racing for SQLite's write lock: under a burst (a
// fleet enrolling at once, a reconnect storm) SQLite's busy handler sleeps
// and retries without any order, and a writer could wait out busy_timeout
// and fail with "database is locked" while others got through. busy_timeout
// still covers the other processes that write the file (gridcity join,
// token …). Reads use a bounded pool of their own (db): in WAL mode they
// never wait for the writer.
type SQLite struct {
	db *sql.DB // reads
	w  *sql.DB // writes, one connection
}

// readConns bounds the read pool: enough for the MCP tools, the app and the
// agents' revocation checks to overlap; more would only add memory and
// page-cache churn on a machine with a few cores.
const readConns = 8

var _ Store = (*SQLite)(nil)

// migrations run in order; each is applied once and recorded in
// schema_version. Append, never edit.
var migrations = []string{
	`CREATE TABLE join_tokens (
		hash BLOB PRIMARY KEY,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		single_use INTEGER NOT NULL,
		used_at INTEGER NOT NULL DEFAULT 0,
		used_by TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE agents (
		name TEXT PRIMARY KEY,
		serial TEXT NOT NULL,
		enrolled_at INTEGER NOT NULL,
		revoked_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE servers (
		name TEXT PRIMARY KEY,
		state BLOB NOT NULL,
		hello BLOB NOT NULL,
		last_seen INTEGER NOT NULL
	);
	CREATE TABLE metrics (
		server TEXT NOT NULL,
		at INTEGER NOT NULL,
		cpu REAL NOT NULL,
		mem REAL NOT NULL,
		load1 REAL NOT NULL
	);
	CREATE INDEX metrics_server_at ON metrics(server, at);
	CREATE TABLE tokens (
		name TEXT PRIMARY KEY,
		scope TEXT NOT NULL,
		hash BLOB NOT NULL UNIQUE,
		created_at INTEGER NOT NULL,
		revoked_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE blobs (
		key TEXT PRIMARY KEY,
		value BLOB NOT NULL
	);`,
	// 2: people who approve commands, their app sessions, command requests
	// and the audit log.
	`CREATE TABLE approvers (
		name TEXT PRIMARY KEY,
		password_hash TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE sessions (
		hash BLOB PRIMARY KEY,
		approver TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE TABLE requests (
		id TEXT PRIMARY KEY,
		server TEXT NOT NULL,
		status TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		body BLOB NOT NULL
	);
	CREATE INDEX requests_status ON requests(status, created_at);
	CREATE TABLE audit (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		at INTEGER NOT NULL,
		request_id TEXT NOT NULL,
		step TEXT NOT NULL,
		actor TEXT NOT NULL,
		detail BLOB NOT NULL
	);
	CREATE INDEX audit_request ON audit(request_id, seq);`,
	// 3: every app session also has a second secret, sent by the page in a
	// header, kept here by its sha256. Sessions from before it have none and
	// could never be used again, so they are removed: their approvers log in
	// once more.
	`DELETE FROM sessions;
	ALTER TABLE sessions ADD COLUMN csrf_hash BLOB NOT NULL DEFAULT x'';`,
	// 4: incidents, one per spell of a target being a root cause, with its
	// start and end (0 while open) so that the history survives a restart;
	// explains is a JSON array of target ids. A target has at most one open
	// incident.
	`CREATE TABLE incidents (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		target TEXT NOT NULL,
		kind TEXT NOT NULL,
		reason TEXT NOT NULL,
		started_at INTEGER NOT NULL,
		ended_at INTEGER NOT NULL DEFAULT 0,
		explains TEXT NOT NULL DEFAULT '[]'
	);
	CREATE UNIQUE INDEX incidents_open_target ON incidents(target) WHERE ended_at = 0;
	CREATE INDEX incidents_started ON incidents(started_at);`,
	// 5: the SHA-256 of each agent's public key, so that an agent asking
	// again with the same key (its first answer was lost) is told apart
	// from another agent taking its name.
	`ALTER TABLE agents ADD COLUMN key_sha256 BLOB NOT NULL DEFAULT x'';`,
	// 6: each request's MCP token, so that a token's pending requests are
	// counted by the index instead of decoding every request's body.
	`ALTER TABLE requests ADD COLUMN token TEXT NOT NULL DEFAULT '';
	UPDATE requests SET token = COALESCE(json_extract(CAST(body AS TEXT), '$.token'), '') WHERE json_valid(CAST(body AS TEXT));
	CREATE INDEX requests_token_status ON requests(token, status, created_at);`,
	// 7: the metric history as buckets of min, sum and max per metric (cpu,
	// memory, load, disk:MOUNT), at two resolutions (step, in seconds: 60
	// kept for a day, 900 for a week by default), instead of one row per
	// sample: a bounded size whatever the sampling rate, and disks beside
	// the host figures. The old samples become buckets of both resolutions;
	// those that are not numbers (±Inf, NULL from a NaN) are left behind.
	`CREATE TABLE metric_buckets (
		server TEXT NOT NULL,
		step INTEGER NOT NULL,
		at INTEGER NOT NULL,
		metric TEXT NOT NULL,
		n INTEGER NOT NULL,
		vmin REAL NOT NULL,
		vsum REAL NOT NULL,
		vmax REAL NOT NULL,
		PRIMARY KEY (server, step, at, metric)
	) WITHOUT ROWID;
	CREATE INDEX metric_buckets_age ON metric_buckets(step, at);
	INSERT INTO metric_buckets(server, step, at, metric, n, vmin, vsum, vmax)
		SELECT server, step, at / (step * 1000) * (step * 1000), metric, count(*), min(v), sum(v), max(v)
		FROM (
			SELECT server, at, 'cpu' AS metric, cpu AS v FROM metrics
			UNION ALL SELECT server, at, 'memory', mem FROM metrics
			UNION ALL SELECT server, at, 'load', load1 FROM metrics
		), (SELECT 60 AS step UNION ALL SELECT 900)
		WHERE abs(v) <= 1.7976931348623157e308
		GROUP BY server, step, at / (step * 1000), metric;
	DROP TABLE metrics;`,
	// 8: the coordinators serving this store, each with the addresses it
	// advertises and its last heartbeat (see replicas.go).
	replicasTable,
	// 9: which replica holds each agent's stream (see leases.go).
	leasesTable,
	// 10: approved commands handed to the replica holding their agent's
	// stream, and each replica's public hand-off key (see handoffs.go).
	handoffsSQLite,
	// 11: each vantage point's latest check of a resource, shared by the
	// replicas (see probechecks.go).
	probeChecksTable,
	// 12: on-demand probes one replica asks of the replica holding the
	// agent (see probeasks.go).
	probeAsksTable,
	// 13: each hand-off's authenticator (see handoffs.go).
	handoffAuthSQLite,
	// 14: OAuth clients, authorization codes and tokens (see oauth.go).
	oauthTables,
	// 15: the audit log as a hash chain (see chain.go); the rows written
	// before it are chained in Go in the same transaction.
	auditChainColumns,
}

// OpenSQLite opens (creating if needed) the store at dir/gridcity.db.
func OpenSQLite(ctx context.Context, dir string) (*SQLite, error) {
	// Tightened without a word here: serve, which an operator watches,
	// has said so already unless the mode changed since.
	if _, err := atomicfile.PrivateDir(dir, "data directory"); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "gridcity.db")
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	// busy_timeout lets the CLI (gridcity join, token …) write while serve
	// runs. synchronous(FULL): a committed audit row survives a power cut,
	// not only a crash; the fleet's state is written in batches, so the
	// fsync per commit is paid mostly by the command steps (a few ms each).
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_txlock=immediate"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	// The schema first, through the writer, so that readers open a file
	// that is already in WAL mode and migrated.
	s := &SQLite{w: w}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(readConns)
	db.SetMaxIdleConns(readConns)
	s.db = db
	return s, nil
}

// privateFiles makes the database and SQLite's files beside it mode 0600
// before SQLite opens them. SQLite creates the -wal, -shm and -journal
// files with the mode of the database file, whatever the umask, so a
// database created 0600 keeps them private; one created by SQLite itself
// under umask 022 would be 0644, and so would the WAL holding the CA key.
// An existing file (from an older gridcity, or copied in) is tightened:
// these files are the store's own.
func privateFiles(db string) error {
	f, err := os.OpenFile(db, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", db, err)
	}
	err = f.Chmod(0o600)
	f.Close()
	if err != nil {
		return fmt.Errorf("make %s private: %w", db, err)
	}
	for _, p := range []string{db + "-wal", db + "-shm", db + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

func (s *SQLite) migrate(ctx context.Context) error {
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this gridcity (%d): upgrade gridcity", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if migrations[i] == auditChainColumns {
			if err := backfillSQLite(ctx, tx); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (?)`, i+1); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *SQLite) Close() error {
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	return errors.Join(err, s.w.Close())
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func (s *SQLite) CreateJoinToken(ctx context.Context, t JoinToken) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO join_tokens(hash, created_at, expires_at, single_use) VALUES (?,?,?,?)`,
		t.Hash, ms(t.CreatedAt), ms(t.ExpiresAt), t.SingleUse)
	if err != nil {
		return fmt.Errorf("record join token: %w", err)
	}
	return nil
}

func (s *SQLite) Enroll(ctx context.Context, tokenHash []byte, now time.Time, a Agent) (bool, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var expires, usedAt int64
	var single bool
	var usedBy string
	err = tx.QueryRowContext(ctx, `SELECT expires_at, single_use, used_at, used_by FROM join_tokens WHERE hash = ?`, tokenHash).Scan(&expires, &single, &usedAt, &usedBy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, ErrTokenUnknown
	case err != nil:
		return false, err
	case now.UnixMilli() >= expires:
		return false, ErrTokenExpired
	}
	var revoked int64
	var key []byte
	err = tx.QueryRowContext(ctx, `SELECT revoked_at, key_sha256 FROM agents WHERE name = ?`, a.Name).Scan(&revoked, &key)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	// The same agent again: its name, not revoked, the key it enrolled
	// with, and for a one-time token the token it used.
	same := exists && revoked == 0 && len(a.Key) > 0 && bytes.Equal(key, a.Key)
	switch {
	case single && usedAt != 0 && (!same || usedBy != a.Name):
		return false, ErrTokenUsed
	case same:
		if single && usedAt == 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE join_tokens SET used_at = ?, used_by = ? WHERE hash = ?`, ms(now), a.Name, tokenHash); err != nil {
				return false, err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET serial = ? WHERE name = ?`, a.Serial, a.Name); err != nil {
			return false, err
		}
		return true, tx.Commit()
	case exists && revoked == 0:
		return false, ErrNameTaken
	}
	if _, err := tx.ExecContext(ctx, `UPDATE join_tokens SET used_at = ?, used_by = ? WHERE hash = ?`, ms(now), a.Name, tokenHash); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO agents(name, serial, enrolled_at, revoked_at, key_sha256) VALUES (?,?,?,0,?)
		ON CONFLICT(name) DO UPDATE SET serial = excluded.serial, enrolled_at = excluded.enrolled_at, revoked_at = 0, key_sha256 = excluded.key_sha256`,
		a.Name, a.Serial, ms(a.EnrolledAt), nonNil(a.Key)); err != nil {
		return false, err
	}
	return false, tx.Commit()
}

// nonNil is b, or an empty slice for nil: a NOT NULL BLOB column.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (s *SQLite) Agent(ctx context.Context, name string) (Agent, error) {
	a := Agent{Name: name}
	var enrolled, revoked int64
	err := s.db.QueryRowContext(ctx, `SELECT serial, enrolled_at, revoked_at, key_sha256 FROM agents WHERE name = ?`, name).Scan(&a.Serial, &enrolled, &revoked, &a.Key)
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	if err != nil {
		return Agent{}, fmt.Errorf("read agent %q: %w", name, err)
	}
	a.EnrolledAt, a.RevokedAt = fromMs(enrolled), fromMs(revoked)
	return a, nil
}

func (s *SQLite) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, serial, enrolled_at, revoked_at FROM agents ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanAgent)
}

func (s *SQLite) AgentsStamp(ctx context.Context) (AgentsStamp, error) {
	var st AgentsStamp
	err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(enrolled_at), 0), coalesce(sum(revoked_at), 0) FROM agents`).Scan(&st.N, &st.Enrolled, &st.Revoked)
	if err != nil {
		return st, fmt.Errorf("read the agents' stamp: %w", err)
	}
	return st, nil
}

func (s *SQLite) RevokeAgent(ctx context.Context, name string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE agents SET revoked_at = ? WHERE name = ? AND revoked_at = 0`, ms(at), name)
	if err != nil {
		return fmt.Errorf("revoke agent %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *SQLite) SaveServers(ctx context.Context, servers []ServerRecord) error {
	if len(servers) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO servers(name, state, hello, last_seen) VALUES (?,?,?,?)
		ON CONFLICT(name) DO UPDATE SET state = excluded.state, hello = excluded.hello, last_seen = excluded.last_seen`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, r := range servers {
		if _, err := stmt.ExecContext(ctx, r.Name, r.State, r.Hello, ms(r.LastSeen)); err != nil {
			return fmt.Errorf("save server %q: %w", r.Name, err)
		}
	}
	return tx.Commit()
}

func (s *SQLite) Servers(ctx context.Context) ([]ServerRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, state, hello, last_seen FROM servers ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanServer)
}

func (s *SQLite) CreateToken(ctx context.Context, t Token) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var revoked int64
	err = tx.QueryRowContext(ctx, `SELECT revoked_at FROM tokens WHERE name = ?`, t.Name).Scan(&revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case revoked == 0:
		return ErrExists
	}
	// A revoked token's name may be reused; the old hash is dropped with it.
	if _, err := tx.ExecContext(ctx, `INSERT INTO tokens(name, scope, hash, created_at, revoked_at) VALUES (?,?,?,?,0)
		ON CONFLICT(name) DO UPDATE SET scope = excluded.scope, hash = excluded.hash, created_at = excluded.created_at, revoked_at = 0`,
		t.Name, string(t.Scope), t.Hash, ms(t.CreatedAt)); err != nil {
		return fmt.Errorf("record token %q: %w", t.Name, err)
	}
	return tx.Commit()
}

func (s *SQLite) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	t := Token{Hash: hash}
	var scope string
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT name, scope, created_at FROM tokens WHERE hash = ? AND revoked_at = 0`, hash).Scan(&t.Name, &scope, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, err
	}
	t.Scope, t.CreatedAt = Scope(scope), fromMs(created)
	return t, nil
}

func (s *SQLite) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, scope, created_at, revoked_at FROM tokens ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanToken)
}

func (s *SQLite) RevokeToken(ctx context.Context, name string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at = 0`, ms(at), name)
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *SQLite) Blob(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM blobs WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return v, err
}

func (s *SQLite) PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error) {
	if _, err := s.w.ExecContext(ctx, `INSERT INTO blobs(key, value) VALUES (?,?) ON CONFLICT(key) DO NOTHING`, key, value); err != nil {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	return s.Blob(ctx, key)
}

// SwapBlob overwrites the old value where it lay (secure_delete) and then
// checkpoints and truncates the WAL, so that the file keeps no copy of
// what it replaced (the CA key an older gridcity kept in the clear): as
// far as SQLite allows, since a checkpoint that readers hold up leaves the
// WAL to be reused rather than cut.
func (s *SQLite) SwapBlob(ctx context.Context, key string, old, value []byte) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA secure_delete = OFF`)
	res, err := conn.ExecContext(ctx, `UPDATE blobs SET value = ? WHERE key = ? AND value = ?`, nonNil(value), key, nonNil(old))
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return blobSwapFailed(ctx, key, s.Blob)
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("store %s: checkpoint after the change: %w", key, err)
	}
	return nil
}
