package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OAuth clients, authorization codes and tokens: what the coordinator, as
// its own OAuth 2.1 authorization server (package oauth), must not lose
// across a restart or keep apart between replicas. Like MCP tokens, codes
// and tokens are kept only as the sha256 of their text.

// ErrReused is a single-use secret presented again: an authorization code
// already exchanged, or a refresh token already rotated or revoked. The
// store has revoked what the secret led to by the time it answers.
var ErrReused = errors.New("already used")

// How a client came to be known.
const (
	RegisteredDCR  = "dcr"  // RFC 7591 Dynamic Client Registration
	RegisteredCIMD = "cimd" // a Client ID Metadata Document, fetched by its URL
)

// OAuthUnusedKept is how long a client registered by DCR is kept without
// ever getting a token.
const OAuthUnusedKept = 24 * time.Hour

// Kinds of OAuth token.
const (
	OAuthAccess  = "access"
	OAuthRefresh = "refresh"
)

// OAuthClient is an MCP client known to the authorization server.
type OAuthClient struct {
	ID           string // random for DCR; the document's https URL for CIMD
	Name         string
	RedirectURIs []string
	Registration string // RegisteredDCR or RegisteredCIMD
	CreatedAt    time.Time
	RemovedAt    time.Time // zero while the client may sign in
}

// Removed reports whether the client was removed (its tokens revoked).
func (c OAuthClient) Removed() bool { return !c.RemovedAt.IsZero() }

// OAuthCode is an authorization code an approver granted, kept by hash.
type OAuthCode struct {
	Hash        []byte
	Client      string
	Family      string // the grant: every token issued from the code carries it
	RedirectURI string
	Challenge   string // PKCE S256 code challenge
	Scope       Scope
	Resource    string // RFC 8707: the MCP endpoint the tokens are for
	Approver    string // who granted it
	CreatedAt   time.Time
	ExpiresAt   time.Time
	UsedAt      time.Time // zero until exchanged
}

// OAuthToken is an access or refresh token, kept by hash.
type OAuthToken struct {
	Hash      []byte
	Kind      string // OAuthAccess or OAuthRefresh
	Client    string
	Family    string
	Scope     Scope
	Resource  string
	Approver  string
	CreatedAt time.Time
	ExpiresAt time.Time
	RotatedAt time.Time // a refresh token exchanged for a new pair
	RevokedAt time.Time
}

// OAuthPair is what a refresh token is rotated into: new hashes and
// expiries; the rest is the old token's.
type OAuthPair struct {
	AccessHash, RefreshHash       []byte
	AccessExpires, RefreshExpires time.Time
}

// oauthTables is the same on both engines. The migration list of each
// engine appends it (SQLite 14, PostgreSQL 8).
const oauthTables = `CREATE TABLE oauth_clients (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		redirect_uris TEXT NOT NULL,
		registration TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		removed_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE TABLE oauth_codes (
		hash BYTEA PRIMARY KEY,
		client TEXT NOT NULL,
		family TEXT NOT NULL,
		redirect_uri TEXT NOT NULL,
		challenge TEXT NOT NULL,
		scope TEXT NOT NULL,
		resource TEXT NOT NULL,
		approver TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		used_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);
	CREATE TABLE oauth_tokens (
		hash BYTEA PRIMARY KEY,
		kind TEXT NOT NULL,
		client TEXT NOT NULL,
		family TEXT NOT NULL,
		scope TEXT NOT NULL,
		resource TEXT NOT NULL,
		approver TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		rotated_at BIGINT NOT NULL DEFAULT 0,
		revoked_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX oauth_tokens_client ON oauth_tokens(client);
	CREATE INDEX oauth_tokens_family ON oauth_tokens(family);
	CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);`

const (
	oauthClientSelect = `SELECT id, name, redirect_uris, registration, created_at, removed_at FROM oauth_clients`
	oauthCodeSelect   = `SELECT hash, client, family, redirect_uri, challenge, scope, resource, approver, created_at, expires_at, used_at FROM oauth_codes`
	oauthTokenSelect  = `SELECT hash, kind, client, family, scope, resource, approver, created_at, expires_at, rotated_at, revoked_at FROM oauth_tokens`
	oauthTokenInsert  = `INSERT INTO oauth_tokens(hash, kind, client, family, scope, resource, approver, created_at, expires_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`
	// Tokens long expired are forgotten when new ones are written: an
	// expired token is refused anyway, and the table stays bounded.
	oauthForget = `DELETE FROM oauth_tokens WHERE expires_at < $1`
	oauthKept   = 7 * 24 * time.Hour
)

func scanOAuthClient(scan func(...any) error) (OAuthClient, error) {
	var c OAuthClient
	var uris string
	var created, removed int64
	if err := scan(&c.ID, &c.Name, &uris, &c.Registration, &created, &removed); err != nil {
		return c, err
	}
	c.CreatedAt, c.RemovedAt = fromMs(created), fromMs(removed)
	if err := json.Unmarshal([]byte(uris), &c.RedirectURIs); err != nil {
		return c, fmt.Errorf("the stored redirect URIs of OAuth client %q cannot be read: %w", c.ID, err)
	}
	return c, nil
}

func scanOAuthCode(scan func(...any) error) (OAuthCode, error) {
	var c OAuthCode
	var scope string
	var created, expires, used int64
	if err := scan(&c.Hash, &c.Client, &c.Family, &c.RedirectURI, &c.Challenge, &scope, &c.Resource, &c.Approver, &created, &expires, &used); err != nil {
		return c, err
	}
	c.Scope, c.CreatedAt, c.ExpiresAt, c.UsedAt = Scope(scope), fromMs(created), fromMs(expires), fromMs(used)
	return c, nil
}

func scanOAuthToken(scan func(...any) error) (OAuthToken, error) {
	var t OAuthToken
	var scope string
	var created, expires, rotated, revoked int64
	if err := scan(&t.Hash, &t.Kind, &t.Client, &t.Family, &scope, &t.Resource, &t.Approver, &created, &expires, &rotated, &revoked); err != nil {
		return t, err
	}
	t.Scope, t.CreatedAt, t.ExpiresAt = Scope(scope), fromMs(created), fromMs(expires)
	t.RotatedAt, t.RevokedAt = fromMs(rotated), fromMs(revoked)
	return t, nil
}

func oauthTokenArgs(t OAuthToken) []any {
	return []any{t.Hash, t.Kind, t.Client, t.Family, string(t.Scope), t.Resource, t.Approver, ms(t.CreatedAt), ms(t.ExpiresAt)}
}

// oauthTx is a transaction of either engine, so that the OAuth steps,
// which read and write several rows at once, are written once.
type oauthTx interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	row(ctx context.Context, q string, args ...any) func(...any) error
}

type sqliteTx struct{ tx *sql.Tx }

func (t sqliteTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqliteTx) row(ctx context.Context, q string, args ...any) func(...any) error {
	r := t.tx.QueryRowContext(ctx, q, args...)
	return func(dest ...any) error {
		if err := r.Scan(dest...); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else {
			return err
		}
	}
}

type pgTx struct{ tx pgx.Tx }

func (t pgTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgTx) row(ctx context.Context, q string, args ...any) func(...any) error {
	r := t.tx.QueryRow(ctx, q, args...)
	return func(dest ...any) error {
		if err := r.Scan(dest...); errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		} else {
			return err
		}
	}
}

// inTx runs f in one write transaction of s; f's error rolls it back,
// except an ErrReused, whose revocations are committed before it is
// returned.
func (s *SQLite) inTx(ctx context.Context, f func(oauthTx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(sqliteTx{tx}); err != nil {
		if errors.Is(err, ErrReused) {
			if cerr := tx.Commit(); cerr != nil {
				return cerr
			}
		}
		return err
	}
	return tx.Commit()
}

func (p *Postgres) inTx(ctx context.Context, f func(oauthTx) error) error {
	var reused error
	err := p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		err := f(pgTx{tx})
		if errors.Is(err, ErrReused) {
			reused = err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return reused
}

// putOAuthClient registers c unless max live clients are registered
// (ErrTooMany). A client of the same id is replaced (a CIMD client's
// document fetched again), and may sign in again if it was removed.
func putOAuthClient(ctx context.Context, tx oauthTx, c OAuthClient, max int) error {
	if c.ID == "" || c.Name == "" || len(c.RedirectURIs) == 0 || (c.Registration != RegisteredDCR && c.Registration != RegisteredCIMD) {
		return fmt.Errorf("register OAuth client %q: it needs an id, a name, redirect URIs and how it registered", c.ID)
	}
	uris, err := json.Marshal(c.RedirectURIs)
	if err != nil {
		return err
	}
	// A client registered a day ago that never got a token is forgotten
	// (it answers invalid_client, and registers again), so that
	// registrations nobody completed cannot hold the places for ever.
	if _, err := tx.exec(ctx, `DELETE FROM oauth_clients WHERE registration = $1 AND removed_at = 0 AND created_at < $2
		AND NOT EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.client = oauth_clients.id)`, RegisteredDCR, ms(c.CreatedAt.Add(-OAuthUnusedKept))); err != nil {
		return fmt.Errorf("forget unused OAuth clients: %w", err)
	}
	var n int64
	if err := tx.row(ctx, `SELECT COUNT(*) FROM oauth_clients WHERE removed_at = 0 AND id <> $1`, c.ID)(&n); err != nil {
		return fmt.Errorf("count OAuth clients: %w", err)
	}
	if n >= int64(max) {
		return fmt.Errorf("register OAuth client %q: %w: %d clients are registered already; remove one with `gridcity token revoke NAME`", c.Name, ErrTooMany, n)
	}
	if _, err := tx.exec(ctx, `INSERT INTO oauth_clients(id, name, redirect_uris, registration, created_at, removed_at) VALUES ($1,$2,$3,$4,$5,0)
		ON CONFLICT(id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris, registration = excluded.registration, removed_at = 0`,
		c.ID, c.Name, string(uris), c.Registration, ms(c.CreatedAt)); err != nil {
		return fmt.Errorf("register OAuth client %q: %w", c.ID, err)
	}
	return nil
}

// removeOAuthClient marks the client removed and revokes its tokens.
func removeOAuthClient(ctx context.Context, tx oauthTx, id string, at time.Time) error {
	n, err := tx.exec(ctx, `UPDATE oauth_clients SET removed_at = $1 WHERE id = $2 AND removed_at = 0`, ms(at), id)
	if err != nil {
		return fmt.Errorf("remove OAuth client %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("remove OAuth client %q: %w", id, ErrNotFound)
	}
	return revokeOAuthWhere(ctx, tx, "client", id, at)
}

// revokeOAuthWhere revokes every live token whose column (client or
// family) is value.
func revokeOAuthWhere(ctx context.Context, tx oauthTx, column, value string, at time.Time) error {
	if _, err := tx.exec(ctx, `UPDATE oauth_tokens SET revoked_at = $1 WHERE `+column+` = $2 AND revoked_at = 0`, ms(at), value); err != nil {
		return fmt.Errorf("revoke the OAuth tokens of %s %q: %w", column, value, err)
	}
	return nil
}

// useOAuthCode marks the code used and returns it; a code used before
// revokes the tokens issued from it and answers ErrReused.
func useOAuthCode(ctx context.Context, tx oauthTx, hash []byte, now time.Time) (OAuthCode, error) {
	c, err := scanOAuthCode(tx.row(ctx, oauthCodeSelect+` WHERE hash = $1`, hash))
	if err != nil {
		return c, err
	}
	if !c.UsedAt.IsZero() {
		if err := revokeOAuthWhere(ctx, tx, "family", c.Family, now); err != nil {
			return c, err
		}
		return c, fmt.Errorf("authorization code: %w; the tokens issued from it are revoked", ErrReused)
	}
	if _, err := tx.exec(ctx, `UPDATE oauth_codes SET used_at = $1 WHERE hash = $2`, ms(now), hash); err != nil {
		return c, fmt.Errorf("use authorization code: %w", err)
	}
	// Codes live a minute; the used ones are kept a day to detect reuse.
	if _, err := tx.exec(ctx, `DELETE FROM oauth_codes WHERE expires_at < $1`, ms(now.Add(-24*time.Hour))); err != nil {
		return c, fmt.Errorf("forget old authorization codes: %w", err)
	}
	return c, nil
}

func issueOAuthTokens(ctx context.Context, tx oauthTx, now time.Time, ts ...OAuthToken) error {
	if _, err := tx.exec(ctx, oauthForget, ms(now.Add(-oauthKept))); err != nil {
		return fmt.Errorf("forget expired OAuth tokens: %w", err)
	}
	for _, t := range ts {
		if t.Kind != OAuthAccess && t.Kind != OAuthRefresh || len(t.Hash) == 0 || t.Client == "" || t.Family == "" {
			return fmt.Errorf("issue OAuth token for client %q: it needs a kind, a hash, a client and a family", t.Client)
		}
		if _, err := tx.exec(ctx, oauthTokenInsert, oauthTokenArgs(t)...); err != nil {
			return fmt.Errorf("issue OAuth %s token for client %q: %w", t.Kind, t.Client, err)
		}
	}
	return nil
}

// rotateOAuthRefresh exchanges a live refresh token for next. A refresh
// token presented after it was rotated or revoked revokes every token of
// its client (RFC 9700 §4.14.2: the holder may be a thief) and answers
// ErrReused; an expired one answers ErrNotFound.
func rotateOAuthRefresh(ctx context.Context, tx oauthTx, hash []byte, next OAuthPair, now time.Time) (OAuthToken, error) {
	old, err := scanOAuthToken(tx.row(ctx, oauthTokenSelect+` WHERE hash = $1 AND kind = $2`, hash, OAuthRefresh))
	if err != nil {
		return old, err
	}
	if !old.RotatedAt.IsZero() || !old.RevokedAt.IsZero() {
		if err := revokeOAuthWhere(ctx, tx, "client", old.Client, now); err != nil {
			return old, err
		}
		return old, fmt.Errorf("refresh token: %w; every token of client %q is revoked", ErrReused, old.Client)
	}
	if !now.Before(old.ExpiresAt) {
		return old, fmt.Errorf("refresh token expired at %s: %w", old.ExpiresAt.Format(time.RFC3339), ErrNotFound)
	}
	if _, err := tx.exec(ctx, `UPDATE oauth_tokens SET rotated_at = $1 WHERE hash = $2`, ms(now), hash); err != nil {
		return old, fmt.Errorf("rotate refresh token: %w", err)
	}
	access, refresh := old, old
	access.Kind, access.Hash, access.CreatedAt, access.ExpiresAt = OAuthAccess, next.AccessHash, now, next.AccessExpires
	refresh.Hash, refresh.CreatedAt, refresh.ExpiresAt = next.RefreshHash, now, next.RefreshExpires
	return old, issueOAuthTokens(ctx, tx, now, access, refresh)
}

// revokeOAuthToken revokes the token with hash and, for a refresh token,
// every token of its grant (RFC 7009 §2.1). An unknown token is not an
// error: RFC 7009 answers 200 either way.
func revokeOAuthToken(ctx context.Context, tx oauthTx, hash []byte, at time.Time) error {
	t, err := scanOAuthToken(tx.row(ctx, oauthTokenSelect+` WHERE hash = $1`, hash))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if t.Kind == OAuthRefresh {
		return revokeOAuthWhere(ctx, tx, "family", t.Family, at)
	}
	_, err = tx.exec(ctx, `UPDATE oauth_tokens SET revoked_at = $1 WHERE hash = $2 AND revoked_at = 0`, ms(at), hash)
	return err
}

func (s *SQLite) PutOAuthClient(ctx context.Context, c OAuthClient, max int) error {
	return s.inTx(ctx, func(tx oauthTx) error { return putOAuthClient(ctx, tx, c, max) })
}

func (s *SQLite) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	c, err := scanOAuthClient(s.db.QueryRowContext(ctx, oauthClientSelect+` WHERE id = $1`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("OAuth client %q: %w", id, ErrNotFound)
	}
	return c, err
}

func (s *SQLite) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	rows, err := s.db.QueryContext(ctx, oauthClientSelect+` ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanOAuthClient)
}

func (s *SQLite) RemoveOAuthClient(ctx context.Context, id string, at time.Time) error {
	return s.inTx(ctx, func(tx oauthTx) error { return removeOAuthClient(ctx, tx, id, at) })
}

func (s *SQLite) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO oauth_codes(hash, client, family, redirect_uri, challenge, scope, resource, approver, created_at, expires_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`, c.Hash, c.Client, c.Family, c.RedirectURI, c.Challenge, string(c.Scope), c.Resource, c.Approver, ms(c.CreatedAt), ms(c.ExpiresAt))
	if err != nil {
		return fmt.Errorf("record authorization code for %q: %w", c.Client, err)
	}
	return nil
}

func (s *SQLite) UseOAuthCode(ctx context.Context, hash []byte, now time.Time) (c OAuthCode, err error) {
	err = s.inTx(ctx, func(tx oauthTx) error { c, err = useOAuthCode(ctx, tx, hash, now); return err })
	return c, err
}

func (s *SQLite) IssueOAuthTokens(ctx context.Context, now time.Time, ts ...OAuthToken) error {
	return s.inTx(ctx, func(tx oauthTx) error { return issueOAuthTokens(ctx, tx, now, ts...) })
}

func (s *SQLite) OAuthTokenByHash(ctx context.Context, hash []byte) (OAuthToken, error) {
	t, err := scanOAuthToken(s.db.QueryRowContext(ctx, oauthTokenSelect+` WHERE hash = $1 AND revoked_at = 0`, hash).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

func (s *SQLite) OAuthTokens(ctx context.Context, client string) ([]OAuthToken, error) {
	rows, err := s.db.QueryContext(ctx, oauthTokenSelect+` WHERE client = $1 ORDER BY created_at`, client)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanOAuthToken)
}

func (s *SQLite) RotateOAuthRefresh(ctx context.Context, hash []byte, next OAuthPair, now time.Time) (old OAuthToken, err error) {
	err = s.inTx(ctx, func(tx oauthTx) error { old, err = rotateOAuthRefresh(ctx, tx, hash, next, now); return err })
	return old, err
}

func (s *SQLite) RevokeOAuthToken(ctx context.Context, hash []byte, at time.Time) error {
	return s.inTx(ctx, func(tx oauthTx) error { return revokeOAuthToken(ctx, tx, hash, at) })
}

func (p *Postgres) PutOAuthClient(ctx context.Context, c OAuthClient, max int) error {
	return p.inTx(ctx, func(tx oauthTx) error { return putOAuthClient(ctx, tx, c, max) })
}

func (p *Postgres) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	c, err := scanOAuthClient(p.pool.QueryRow(ctx, oauthClientSelect+` WHERE id = $1`, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("OAuth client %q: %w", id, ErrNotFound)
	}
	return c, err
}

func (p *Postgres) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	return pgList(ctx, p, scanOAuthClient, oauthClientSelect+` ORDER BY created_at, id COLLATE "C"`)
}

func (p *Postgres) RemoveOAuthClient(ctx context.Context, id string, at time.Time) error {
	return p.inTx(ctx, func(tx oauthTx) error { return removeOAuthClient(ctx, tx, id, at) })
}

func (p *Postgres) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO oauth_codes(hash, client, family, redirect_uri, challenge, scope, resource, approver, created_at, expires_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`, c.Hash, c.Client, c.Family, c.RedirectURI, c.Challenge, string(c.Scope), c.Resource, c.Approver, ms(c.CreatedAt), ms(c.ExpiresAt))
	if err != nil {
		return fmt.Errorf("record authorization code for %q: %w", c.Client, err)
	}
	return nil
}

func (p *Postgres) UseOAuthCode(ctx context.Context, hash []byte, now time.Time) (c OAuthCode, err error) {
	err = p.inTx(ctx, func(tx oauthTx) error {
		// Two replicas exchanging one code at once: the row lock makes
		// the second see it used.
		if _, err := tx.exec(ctx, `SELECT 1 FROM oauth_codes WHERE hash = $1 FOR UPDATE`, hash); err != nil {
			return err
		}
		c, err = useOAuthCode(ctx, tx, hash, now)
		return err
	})
	return c, err
}

func (p *Postgres) IssueOAuthTokens(ctx context.Context, now time.Time, ts ...OAuthToken) error {
	return p.inTx(ctx, func(tx oauthTx) error { return issueOAuthTokens(ctx, tx, now, ts...) })
}

func (p *Postgres) OAuthTokenByHash(ctx context.Context, hash []byte) (OAuthToken, error) {
	t, err := scanOAuthToken(p.pool.QueryRow(ctx, oauthTokenSelect+` WHERE hash = $1 AND revoked_at = 0`, hash).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

func (p *Postgres) OAuthTokens(ctx context.Context, client string) ([]OAuthToken, error) {
	return pgList(ctx, p, scanOAuthToken, oauthTokenSelect+` WHERE client = $1 ORDER BY created_at`, client)
}

func (p *Postgres) RotateOAuthRefresh(ctx context.Context, hash []byte, next OAuthPair, now time.Time) (old OAuthToken, err error) {
	err = p.inTx(ctx, func(tx oauthTx) error {
		if _, err := tx.exec(ctx, `SELECT 1 FROM oauth_tokens WHERE hash = $1 FOR UPDATE`, hash); err != nil {
			return err
		}
		old, err = rotateOAuthRefresh(ctx, tx, hash, next, now)
		return err
	})
	return old, err
}

func (p *Postgres) RevokeOAuthToken(ctx context.Context, hash []byte, at time.Time) error {
	return p.inTx(ctx, func(tx oauthTx) error { return revokeOAuthToken(ctx, tx, hash, at) })
}
