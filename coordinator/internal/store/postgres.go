package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the engine for a coordinator on a database the operator
// already runs (managed, or with Patroni), and the ground the replicas of
// one fleet will share. It behaves as SQLite does, method for method: the
// same rows, the same errors, the same transactions; times are kept as
// Unix milliseconds (0 for none) as there, and names sort by their bytes
// (COLLATE "C"), as SQLite sorts them, whatever the database's locale.
//
// Where SQLite relies on its one writer to order a read before a write
// (an enrollment, a token's name), PostgreSQL takes a row lock, an
// advisory lock or a conditional upsert, so that two coordinators, or the
// CLI beside one, cannot both pass the check.
type Postgres struct {
	pool *pgDB
}

var _ Store = (*Postgres)(nil)

// Advisory lock classes (the first key of pg_advisory_xact_lock(int, int)),
// spelled so that an operator finds them in pg_locks.
const (
	lockMigrate int32 = 0x67634d47 // "gcMG": the schema, second key 0
	lockEnroll  int32 = 0x6763454e // "gcEN": one enrollment per agent name, second key hashtext(name)
	// "gcRQ": one new request per MCP token at a time, second key
	// hashtext(token), so that the pending limit holds across replicas.
	lockRequests int32 = 0x67635251
	// "gcLD": the leader of the replicas, a session lock (see Lead),
	// second key 0.
	lockLeader int32 = 0x67634c44
)

// pgMigrations run in order, each once, recorded in schema_version, in one
// transaction under an advisory lock: whichever coordinator starts first
// migrates, the others wait and find the work done. Append, never edit.
var pgMigrations = []string{
	// 1: everything SQLite's first seven migrations built. An incident's
	// reason is the fleet's own error text, kept as bytes because a text
	// column refuses invalid UTF-8 and NUL, which SQLite keeps.
	`CREATE TABLE join_tokens (
		hash BYTEA PRIMARY KEY,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		single_use BOOLEAN NOT NULL,
		used_at BIGINT NOT NULL DEFAULT 0,
		used_by TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE agents (
		name TEXT PRIMARY KEY,
		serial TEXT NOT NULL,
		enrolled_at BIGINT NOT NULL,
		revoked_at BIGINT NOT NULL DEFAULT 0,
		key_sha256 BYTEA NOT NULL DEFAULT ''::bytea
	);
	CREATE TABLE servers (
		name TEXT PRIMARY KEY,
		state BYTEA NOT NULL,
		hello BYTEA NOT NULL,
		last_seen BIGINT NOT NULL
	);
	CREATE TABLE tokens (
		name TEXT PRIMARY KEY,
		scope TEXT NOT NULL,
		hash BYTEA NOT NULL UNIQUE,
		created_at BIGINT NOT NULL,
		revoked_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE TABLE blobs (
		key TEXT PRIMARY KEY,
		value BYTEA NOT NULL
	);
	CREATE TABLE approvers (
		name TEXT PRIMARY KEY,
		password_hash TEXT NOT NULL,
		created_at BIGINT NOT NULL
	);
	CREATE TABLE sessions (
		hash BYTEA PRIMARY KEY,
		csrf_hash BYTEA NOT NULL,
		approver TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL
	);
	CREATE INDEX sessions_approver ON sessions(approver);
	CREATE TABLE requests (
		id TEXT PRIMARY KEY,
		server TEXT NOT NULL,
		token TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		body BYTEA NOT NULL
	);
	CREATE INDEX requests_status ON requests(status, created_at);
	CREATE INDEX requests_token_status ON requests(token, status, created_at);
	CREATE TABLE audit (
		seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		at BIGINT NOT NULL,
		request_id TEXT NOT NULL,
		step TEXT NOT NULL,
		actor TEXT NOT NULL,
		detail BYTEA NOT NULL
	);
	CREATE INDEX audit_request ON audit(request_id, seq);
	CREATE TABLE incidents (
		id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		target TEXT NOT NULL,
		kind TEXT NOT NULL,
		reason BYTEA NOT NULL,
		started_at BIGINT NOT NULL,
		ended_at BIGINT NOT NULL DEFAULT 0,
		explains TEXT NOT NULL DEFAULT '[]'
	);
	CREATE UNIQUE INDEX incidents_open_target ON incidents(target) WHERE ended_at = 0;
	CREATE INDEX incidents_started ON incidents(started_at);
	CREATE TABLE metric_buckets (
		server TEXT NOT NULL,
		step INTEGER NOT NULL,
		at BIGINT NOT NULL,
		metric TEXT NOT NULL,
		n BIGINT NOT NULL,
		vmin DOUBLE PRECISION NOT NULL,
		vsum DOUBLE PRECISION NOT NULL,
		vmax DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (server, step, at, metric)
	);
	CREATE INDEX metric_buckets_age ON metric_buckets(step, at);`,
	// 2: the coordinators serving this store (see replicas.go).
	replicasTable,
	// 3: which replica holds each agent's stream (see leases.go).
	leasesTable,
	// 4: approved commands handed to the replica holding their agent's
	// stream, and each replica's public hand-off key (see handoffs.go).
	handoffsPostgres,
	// 5: each vantage point's latest check of a resource, shared by the
	// replicas (see probechecks.go).
	probeChecksTable,
	// 6: on-demand probes one replica asks of the replica holding the
	// agent (see probeasks.go).
	probeAsksTable,
	// 7: each hand-off's authenticator (see handoffs.go).
	handoffAuthPostgres,
	// 8: OAuth clients, authorization codes and tokens (see oauth.go).
	oauthTables,
	// 9: the audit log as a hash chain (see chain.go); the rows written
	// before it are chained in Go in the same transaction, under the
	// schema lock.
	auditChainColumns,
}

// IsPostgresURL says whether a store URL names a PostgreSQL database.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// OpenPostgres connects to the database at rawURL (postgres://USER:PASSWORD@HOST:PORT/DB?…;
// the password may also come from PGPASSWORD or ~/.pgpass) and brings its
// schema up to date. Its errors never carry the password.
func OpenPostgres(ctx context.Context, rawURL string) (*Postgres, error) {
	shown := RedactURL(rawURL)
	if !IsPostgresURL(rawURL) {
		return nil, fmt.Errorf("store URL %s is not a PostgreSQL URL: give postgres://USER:PASSWORD@HOST:PORT/DATABASE", shown)
	}
	secret := ""
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		secret, _ = u.User.Password()
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store URL %s cannot be read: %w: give postgres://USER:PASSWORD@HOST:PORT/DATABASE", shown, redactErr(err, rawURL, shown, secret))
	}
	if secret == "" {
		secret = cfg.ConnConfig.Password
	}
	// As many connections as SQLite's readers and its writer, unless the
	// URL says (pool_max_conns): pgx's default (4 on a small machine) would
	// queue the app and the MCP tools behind a fleet's state flush.
	if !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, readConns+1)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "gridcity"
	}
	where := fmt.Sprintf("%s (database %q as user %q)", shown, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open the PostgreSQL store at %s: %w", where, redactErr(err, rawURL, shown, secret))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the PostgreSQL store at %s: %w: check that PostgreSQL runs there and lets this user in (pg_hba.conf, the password), and that the database exists", where, redactErr(err, rawURL, shown, secret))
	}
	p := &Postgres{pool: &pgDB{pool: pool, addr: pgAddr(cfg.ConnConfig.Host, cfg.ConnConfig.Port), rawURL: rawURL, shown: shown, secret: secret}}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("prepare the PostgreSQL store at %s: %w", where, redactErr(err, rawURL, shown, secret))
	}
	return p, nil
}

// pgAddr is where the database is, for messages: HOST:PORT, or the
// directory of its Unix socket.
func pgAddr(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// RedactURL is the store URL with its password masked, to show in logs
// and errors.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	// Not a URL url.Parse reads (a bad port, say): mask what sits
	// between "user:" and the last "@" before the host.
	return userinfoPassword.ReplaceAllString(s, "${1}xxxxx@")
}

var userinfoPassword = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/]*:).*@`)

// redactErr masks the URL and its password wherever a driver error quotes
// them, keeping the error's identity.
func redactErr(err error, rawURL, shown, secret string) error {
	msg := strings.ReplaceAll(err.Error(), rawURL, shown)
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
		if esc := url.QueryEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
		if esc := url.PathEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (p *Postgres) migrate(ctx context.Context) error {
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		// Held until this transaction ends: a second coordinator starting
		// at the same moment waits here, then finds the schema current.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockMigrate); err != nil {
			return fmt.Errorf("wait for the schema lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
			return err
		}
		if v > len(pgMigrations) {
			return fmt.Errorf("database schema version %d is newer than this gridcity (%d): upgrade gridcity", v, len(pgMigrations))
		}
		for i := v; i < len(pgMigrations); i++ {
			if _, err := tx.Exec(ctx, pgMigrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			if pgMigrations[i] == auditChainColumns {
				if err := backfillPostgres(ctx, tx); err != nil {
					return fmt.Errorf("migration %d: %w", i+1, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version(version) VALUES ($1)`, i+1); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// isUnique reports a unique or primary key violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// sqlLimit is a LIMIT as SQLite reads it: a negative limit is none.
func sqlLimit(limit int) any {
	if limit < 0 {
		return nil
	}
	return limit
}

// pgList runs a query and reads its rows with scan.
func pgList[T any](ctx context.Context, p *Postgres, scan func(func(...any) error) (T, error), q string, args ...any) ([]T, error) {
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scan)
}

// sendBatch runs the queued statements in tx and reports the first that
// failed, named by what(i).
func sendBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch, what func(i int) string) error {
	br := tx.SendBatch(ctx, b)
	for i := range b.Len() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("%s: %w", what(i), err)
		}
	}
	return br.Close()
}

func (p *Postgres) CreateJoinToken(ctx context.Context, t JoinToken) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO join_tokens(hash, created_at, expires_at, single_use) VALUES ($1,$2,$3,$4)`,
		t.Hash, ms(t.CreatedAt), ms(t.ExpiresAt), t.SingleUse)
	if err != nil {
		return fmt.Errorf("record join token: %w", err)
	}
	return nil
}

func (p *Postgres) Enroll(ctx context.Context, tokenHash []byte, now time.Time, a Agent) (bool, error) {
	var again bool
	err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		// One enrollment of a name at a time, whatever its token, and one
		// use of a token at a time: the checks below then see the rows as
		// they will be written.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockEnroll, a.Name); err != nil {
			return err
		}
		var expires, usedAt int64
		var single bool
		var usedBy string
		err := tx.QueryRow(ctx, `SELECT expires_at, single_use, used_at, used_by FROM join_tokens WHERE hash = $1 FOR UPDATE`, tokenHash).Scan(&expires, &single, &usedAt, &usedBy)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrTokenUnknown
		case err != nil:
			return err
		case now.UnixMilli() >= expires:
			return ErrTokenExpired
		}
		var revoked int64
		var key []byte
		err = tx.QueryRow(ctx, `SELECT revoked_at, key_sha256 FROM agents WHERE name = $1`, a.Name).Scan(&revoked, &key)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		same := exists && revoked == 0 && len(a.Key) > 0 && bytes.Equal(key, a.Key)
		switch {
		case single && usedAt != 0 && (!same || usedBy != a.Name):
			return ErrTokenUsed
		case same:
			if single && usedAt == 0 {
				if _, err := tx.Exec(ctx, `UPDATE join_tokens SET used_at = $1, used_by = $2 WHERE hash = $3`, ms(now), a.Name, tokenHash); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE agents SET serial = $1 WHERE name = $2`, a.Serial, a.Name); err != nil {
				return err
			}
			again = true
			return nil
		case exists && revoked == 0:
			return ErrNameTaken
		}
		if _, err := tx.Exec(ctx, `UPDATE join_tokens SET used_at = $1, used_by = $2 WHERE hash = $3`, ms(now), a.Name, tokenHash); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO agents(name, serial, enrolled_at, revoked_at, key_sha256) VALUES ($1,$2,$3,0,$4)
			ON CONFLICT(name) DO UPDATE SET serial = excluded.serial, enrolled_at = excluded.enrolled_at, revoked_at = 0, key_sha256 = excluded.key_sha256`,
			a.Name, a.Serial, ms(a.EnrolledAt), nonNil(a.Key))
		return err
	})
	if err != nil {
		return false, err
	}
	return again, nil
}

func (p *Postgres) Agent(ctx context.Context, name string) (Agent, error) {
	a := Agent{Name: name}
	var enrolled, revoked int64
	err := p.pool.QueryRow(ctx, `SELECT serial, enrolled_at, revoked_at, key_sha256 FROM agents WHERE name = $1`, name).Scan(&a.Serial, &enrolled, &revoked, &a.Key)
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	if err != nil {
		return Agent{}, fmt.Errorf("read agent %q: %w", name, err)
	}
	a.EnrolledAt, a.RevokedAt = fromMs(enrolled), fromMs(revoked)
	return a, nil
}

func (p *Postgres) Agents(ctx context.Context) ([]Agent, error) {
	return pgList(ctx, p, scanAgent, `SELECT name, serial, enrolled_at, revoked_at FROM agents ORDER BY name COLLATE "C"`)
}

func (p *Postgres) AgentsStamp(ctx context.Context) (AgentsStamp, error) {
	var st AgentsStamp
	err := p.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(enrolled_at), 0)::bigint, coalesce(sum(revoked_at), 0)::bigint FROM agents`).Scan(&st.N, &st.Enrolled, &st.Revoked)
	if err != nil {
		return st, fmt.Errorf("read the agents' stamp: %w", err)
	}
	return st, nil
}

func (p *Postgres) RevokeAgent(ctx context.Context, name string, at time.Time) error {
	return p.revoke(ctx, `UPDATE agents SET revoked_at = $1 WHERE name = $2 AND revoked_at = 0`, "agent", name, at)
}

// revoke runs a revocation of what (an agent, a token) by name;
// ErrNotFound when nothing live has that name.
func (p *Postgres) revoke(ctx context.Context, q, what, name string, at time.Time) error {
	tag, err := p.pool.Exec(ctx, q, ms(at), name)
	if err != nil {
		return fmt.Errorf("revoke %s %q: %w", what, name, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

func (p *Postgres) SaveServers(ctx context.Context, servers []ServerRecord) error {
	if len(servers) == 0 {
		return nil
	}
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, r := range servers {
			b.Queue(`INSERT INTO servers(name, state, hello, last_seen) VALUES ($1,$2,$3,$4)
				ON CONFLICT(name) DO UPDATE SET state = excluded.state, hello = excluded.hello, last_seen = excluded.last_seen`,
				r.Name, nonNil(r.State), nonNil(r.Hello), ms(r.LastSeen))
		}
		return sendBatch(ctx, tx, b, func(i int) string { return fmt.Sprintf("save server %q", servers[i].Name) })
	})
}

func (p *Postgres) Servers(ctx context.Context) ([]ServerRecord, error) {
	return pgList(ctx, p, scanServer, `SELECT name, state, hello, last_seen FROM servers ORDER BY name COLLATE "C"`)
}

func (p *Postgres) CreateToken(ctx context.Context, t Token) error {
	// One statement: a live token keeps its name (no row changes), a
	// revoked one gives it up with its old hash.
	tag, err := p.pool.Exec(ctx, `INSERT INTO tokens(name, scope, hash, created_at, revoked_at) VALUES ($1,$2,$3,$4,0)
		ON CONFLICT(name) DO UPDATE SET scope = excluded.scope, hash = excluded.hash, created_at = excluded.created_at, revoked_at = 0
		WHERE tokens.revoked_at <> 0`, t.Name, string(t.Scope), t.Hash, ms(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("record token %q: %w", t.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrExists
	}
	return nil
}

func (p *Postgres) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	t := Token{Hash: hash}
	var scope string
	var created int64
	err := p.pool.QueryRow(ctx, `SELECT name, scope, created_at FROM tokens WHERE hash = $1 AND revoked_at = 0`, hash).Scan(&t.Name, &scope, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, err
	}
	t.Scope, t.CreatedAt = Scope(scope), fromMs(created)
	return t, nil
}

func (p *Postgres) Tokens(ctx context.Context) ([]Token, error) {
	return pgList(ctx, p, scanToken, `SELECT name, scope, created_at, revoked_at FROM tokens ORDER BY name COLLATE "C"`)
}

func (p *Postgres) RevokeToken(ctx context.Context, name string, at time.Time) error {
	return p.revoke(ctx, `UPDATE tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at = 0`, "token", name, at)
}

func (p *Postgres) Blob(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := p.pool.QueryRow(ctx, `SELECT value FROM blobs WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return v, err
}

func (p *Postgres) PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error) {
	if _, err := p.pool.Exec(ctx, `INSERT INTO blobs(key, value) VALUES ($1,$2) ON CONFLICT(key) DO NOTHING`, key, nonNil(value)); err != nil {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	return p.Blob(ctx, key)
}

func (p *Postgres) SwapBlob(ctx context.Context, key string, old, value []byte) error {
	tag, err := p.pool.Exec(ctx, `UPDATE blobs SET value = $1 WHERE key = $2 AND value = $3`, nonNil(value), key, nonNil(old))
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return blobSwapFailed(ctx, key, p.Blob)
	}
	return nil
}

func (p *Postgres) CreateApprover(ctx context.Context, a Approver) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO approvers(name, password_hash, created_at) VALUES ($1,$2,$3)`, a.Name, a.PasswordHash, ms(a.CreatedAt))
	if isUnique(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("record approver %q: %w", a.Name, err)
	}
	return nil
}

func (p *Postgres) Approver(ctx context.Context, name string) (Approver, error) {
	a := Approver{Name: name}
	var created int64
	err := p.pool.QueryRow(ctx, `SELECT password_hash, created_at FROM approvers WHERE name = $1`, name).Scan(&a.PasswordHash, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approver{}, ErrNotFound
	}
	a.CreatedAt = fromMs(created)
	return a, err
}

func (p *Postgres) Approvers(ctx context.Context) ([]Approver, error) {
	return pgList(ctx, p, scanApprover, `SELECT name, created_at FROM approvers ORDER BY name COLLATE "C"`)
}

func (p *Postgres) SetApproverPassword(ctx context.Context, name, hash string) error {
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE approvers SET password_hash = $1 WHERE name = $2`, hash, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE approver = $1`, name)
		return err
	})
}

func (p *Postgres) CreateSession(ctx context.Context, se Session) error {
	if len(se.CSRFHash) == 0 {
		return errors.New("record session: it has no CSRF hash")
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO sessions(hash, csrf_hash, approver, created_at, expires_at) VALUES ($1,$2,$3,$4,$5)`,
		se.Hash, se.CSRFHash, se.Approver, ms(se.CreatedAt), ms(se.ExpiresAt))
	return err
}

func (p *Postgres) SessionByHash(ctx context.Context, hash []byte, now time.Time) (Session, error) {
	se := Session{Hash: hash}
	var created, expires int64
	err := p.pool.QueryRow(ctx, `SELECT csrf_hash, approver, created_at, expires_at FROM sessions WHERE hash = $1 AND expires_at > $2`, hash, ms(now)).
		Scan(&se.CSRFHash, &se.Approver, &created, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	se.CreatedAt, se.ExpiresAt = fromMs(created), fromMs(expires)
	return se, err
}

func (p *Postgres) DeleteSession(ctx context.Context, hash []byte) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM sessions WHERE hash = $1`, hash)
	return err
}

func (p *Postgres) SaveRequestAudited(ctx context.Context, r RequestRecord, steps ...AuditEntry) error {
	if len(steps) == 0 {
		return fmt.Errorf("save request %s: no audit row records the change; every change of a request is audited", r.ID)
	}
	last := steps[len(steps)-1].Step
	err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO requests(id, server, token, status, created_at, body) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT(id) DO UPDATE SET status = excluded.status, body = excluded.body`, r.ID, r.Server, r.Token, r.Status, ms(r.CreatedAt), nonNil(r.Body)); err != nil {
			return err // wrapped below
		}
		// The chain's lock last, after the request's row lock.
		return appendChainPostgres(ctx, tx, steps...)
	})
	if err != nil {
		return fmt.Errorf("save request %s (%s): %w", r.ID, last, err)
	}
	return nil
}

func (p *Postgres) CountRequests(ctx context.Context, token, status string, since time.Time) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT COUNT(*) FROM requests WHERE token = $1 AND status = $2 AND created_at > $3`, token, status, ms(since)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count requests of token %q: %w", token, err)
	}
	return n, nil
}

func (p *Postgres) Request(ctx context.Context, id string) (RequestRecord, error) {
	r := RequestRecord{ID: id}
	var created int64
	err := p.pool.QueryRow(ctx, `SELECT server, status, created_at, body FROM requests WHERE id = $1`, id).Scan(&r.Server, &r.Status, &created, &r.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return RequestRecord{}, ErrNotFound
	}
	r.CreatedAt = fromMs(created)
	return r, err
}

func (p *Postgres) Requests(ctx context.Context, limit int, statuses ...string) ([]RequestRecord, error) {
	q := `SELECT id, server, status, created_at, body FROM requests`
	args := []any{sqlLimit(limit)}
	if len(statuses) > 0 {
		q += ` WHERE status = ANY($2)`
		args = append(args, statuses)
	}
	return pgList(ctx, p, scanRequest, q+` ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $1`, args...)
}

// AppendAuditOnce holds a transaction lock on the request and step, so
// that two coordinators checking at once write one row: the second waits
// for the first's commit, then finds its row.
func (p *Postgres) AppendAuditOnce(ctx context.Context, e AuditEntry) (bool, error) {
	var written bool
	err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('gridcity audit once'), hashtext($1 || chr(1) || $2))`, e.RequestID, e.Step); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, auditExists, e.RequestID, e.Step).Scan(&exists); err != nil || exists {
			return err
		}
		written = true
		return appendChainPostgres(ctx, tx, e)
	})
	if err != nil {
		return false, fmt.Errorf("write audit row (%s %s): %w", e.Step, e.RequestID, err)
	}
	return written, nil
}

func (p *Postgres) AppendAudit(ctx context.Context, e AuditEntry) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		return appendChainPostgres(ctx, tx, e)
	})
}

func (p *Postgres) Audit(ctx context.Context, requestID string, limit int) ([]AuditEntry, error) {
	q := `SELECT seq, at, request_id, step, actor, detail FROM audit`
	args := []any{sqlLimit(limit)}
	if requestID != "" {
		q += ` WHERE request_id = $2`
		args = append(args, requestID)
	}
	return pgList(ctx, p, scanAudit, q+` ORDER BY seq LIMIT $1`, args...)
}

func (p *Postgres) OpenIncident(ctx context.Context, in Incident) (int64, error) {
	explains, err := newIncident(in)
	if err != nil {
		return 0, err
	}
	var id int64
	err = p.pool.QueryRow(ctx, `INSERT INTO incidents(target, kind, reason, started_at, explains) VALUES ($1,$2,$3,$4,$5) RETURNING id`,
		in.Target, in.Kind, []byte(in.Reason), ms(in.StartedAt), explains).Scan(&id)
	if isUnique(err) {
		return 0, fmt.Errorf("record incident on %s: %w: it has an open incident", in.Target, ErrExists)
	}
	if err != nil {
		return 0, fmt.Errorf("record incident on %s: %w", in.Target, err)
	}
	return id, nil
}

func (p *Postgres) UpdateIncident(ctx context.Context, id int64, reason string, explains []string) error {
	ex, err := explainsJSON(explains)
	if err != nil {
		return err
	}
	tag, err := p.pool.Exec(ctx, `UPDATE incidents SET reason = $1, explains = $2 WHERE id = $3 AND ended_at = 0`, []byte(reason), ex, id)
	if err != nil {
		return fmt.Errorf("update incident %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("update incident %d: %w (or it has ended)", id, ErrNotFound)
	}
	return nil
}

func (p *Postgres) EndIncident(ctx context.Context, id int64, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("end incident %d: no end time", id)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE incidents SET ended_at = GREATEST($1, started_at) WHERE id = $2 AND ended_at = 0`, ms(at), id)
	if err != nil {
		return fmt.Errorf("end incident %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("end incident %d: %w (or it has ended)", id, ErrNotFound)
	}
	return nil
}

func (p *Postgres) OpenIncidents(ctx context.Context) ([]Incident, error) {
	return p.incidents(ctx, `WHERE ended_at = 0 ORDER BY started_at, id`)
}

func (p *Postgres) Incidents(ctx context.Context, limit int) ([]Incident, error) {
	return p.incidents(ctx, `ORDER BY started_at DESC, id DESC LIMIT $1`, sqlLimit(limit))
}

func (p *Postgres) incidents(ctx context.Context, rest string, args ...any) ([]Incident, error) {
	rows, err := p.pool.Query(ctx, `SELECT id, target, kind, reason, started_at, ended_at, explains FROM incidents `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return incidentsOrEmpty(collect(rows, scanIncident))
}

func (p *Postgres) AppendMetrics(ctx context.Context, points []MetricPoint, now time.Time, keep MetricRetention) error {
	if len(points) == 0 {
		return nil
	}
	var skipped []error
	err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		skipped = skipped[:0]
		b := &pgx.Batch{}
		var names []string
		for _, pt := range points {
			if err := pt.Check(); err != nil {
				skipped = append(skipped, err)
				continue
			}
			for _, step := range []time.Duration{MetricStep, MetricRollupStep} {
				b.Queue(`INSERT INTO metric_buckets(server, step, at, metric, n, vmin, vsum, vmax) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
					ON CONFLICT(server, step, at, metric) DO UPDATE SET n = metric_buckets.n + excluded.n,
						vmin = LEAST(metric_buckets.vmin, excluded.vmin), vsum = metric_buckets.vsum + excluded.vsum, vmax = GREATEST(metric_buckets.vmax, excluded.vmax)`,
					pt.Server, int64(step/time.Second), bucket(pt.At, step), pt.Metric, pt.N, pt.Min, pt.Sum, pt.Max)
				names = append(names, fmt.Sprintf("append metric %s of %q", pt.Metric, pt.Server))
			}
		}
		for _, r := range []struct {
			step time.Duration
			keep time.Duration
		}{{MetricStep, keep.Raw}, {MetricRollupStep, keep.Rollup}} {
			b.Queue(`DELETE FROM metric_buckets WHERE step = $1 AND at < $2`, int64(r.step/time.Second), bucket(now.Add(-r.keep), r.step))
			names = append(names, fmt.Sprintf("prune metric history older than %s", r.keep))
		}
		return sendBatch(ctx, tx, b, func(i int) string { return names[i] })
	})
	if err != nil {
		return err
	}
	return errors.Join(skipped...)
}

func (p *Postgres) MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]MetricPoint, error) {
	every, err := historyStep(step, every)
	if err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT at / $1 * $1 AS b, metric, sum(n)::bigint, min(vmin), sum(vsum), max(vmax) FROM metric_buckets
		WHERE server = $2 AND step = $3 AND at >= $4 GROUP BY b, metric ORDER BY b, metric COLLATE "C"`,
		every.Milliseconds(), server, int64(step/time.Second), since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read metric history of %q: %w", server, err)
	}
	defer rows.Close()
	rs, err := collect(rows, scanMetric)
	return metricPoints(server, rs), err
}
