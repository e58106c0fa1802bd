// Package store keeps everything the coordinator must not lose across a
// restart behind one interface: enrolled agents and join tokens, MCP tokens,
// the servers' last state and a bounded metric history, and the CA.
//
// SQLite (modernc.org/sqlite, no cgo, WAL) is the default engine;
// PostgreSQL (pgx) is the engine for a database the operator already runs,
// with the same behaviour, checked by the same tests. Secrets
// are never stored in the clear: join tokens and MCP tokens are kept as
// sha256 hashes, and the CA key sealed with the unseal key, which the
// store never holds (package sealing).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors callers match with errors.Is to give the user a precise message.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrTokenUnknown = errors.New("join token unknown")
	ErrTokenExpired = errors.New("join token expired")
	ErrTokenUsed    = errors.New("join token already used")
	ErrNameTaken    = errors.New("server name already enrolled")
	// ErrNotFinite is a metric sample with NaN or ±Inf: it is not written.
	ErrNotFinite = errors.New("not a finite number")
	// ErrBlobChanged is a SwapBlob whose old value is no longer the one
	// stored: another coordinator changed it first. Nothing was written.
	ErrBlobChanged = errors.New("the stored value changed meanwhile")
)

// blobSwapFailed says why a SwapBlob of key changed no row: the blob is
// missing, or holds another value than the one it was read as.
func blobSwapFailed(ctx context.Context, key string, read func(context.Context, string) ([]byte, error)) error {
	if _, err := read(ctx, key); errors.Is(err, ErrNotFound) {
		return fmt.Errorf("replace %s: %w", key, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("replace %s: %w", key, err)
	}
	return fmt.Errorf("replace %s: %w", key, ErrBlobChanged)
}

// Store is the coordinator's persistence. Every method is safe for
// concurrent use.
type Store interface {
	// CreateJoinToken records a join token by its hash.
	CreateJoinToken(ctx context.Context, t JoinToken) error
	// Enroll consumes the join token with the given hash and records the
	// agent, atomically: a refused enrollment changes nothing. The same
	// agent asking again (same name and key, not revoked, with a token
	// still valid or the one-time token it used) is enrolled again: its
	// serial is replaced and again is true. That is an agent retrying
	// after the answer to its first request was lost.
	Enroll(ctx context.Context, tokenHash []byte, now time.Time, a Agent) (again bool, err error)
	// Agent returns the enrolled agent with that name.
	Agent(ctx context.Context, name string) (Agent, error)
	Agents(ctx context.Context) ([]Agent, error)
	// AgentsStamp changes whenever an agent is enrolled, enrolled again
	// or revoked, in this process or any other: a cheap read that tells
	// whether what Agents answered is still so for names and revocations
	// (an agent enrolled again within the same millisecond with a new
	// serial alone may keep the stamp).
	AgentsStamp(ctx context.Context) (AgentsStamp, error)
	// RevokeAgent marks the agent's certificate revoked; its streams are refused.
	RevokeAgent(ctx context.Context, name string, at time.Time) error

	// SaveServers upserts the last known state of servers in one transaction.
	SaveServers(ctx context.Context, servers []ServerRecord) error
	Servers(ctx context.Context) ([]ServerRecord, error)
	// AppendMetrics merges one-minute buckets into the history at both
	// resolutions (MetricStep and MetricRollupStep) in one transaction, and
	// deletes the buckets older than keep allows before now. A point that
	// fails Check is not written, the others are, and the error
	// (ErrNotFinite) names it.
	AppendMetrics(ctx context.Context, points []MetricPoint, now time.Time, keep MetricRetention) error
	// MetricHistory returns a server's buckets of one resolution (MetricStep
	// or MetricRollupStep) that start at or after since, oldest first,
	// merged into buckets of every (a whole number of steps, aligned to the
	// Unix epoch; 0: as kept); buckets that fail Check are left out.
	MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]MetricPoint, error)

	// CreateToken records an MCP token by its hash; ErrExists when the name is taken.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns the live (not revoked) token with that hash.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, name string, at time.Time) error

	// Blob and PutBlobIfAbsent hold small named values such as the CA.
	// PutBlobIfAbsent returns the value that is stored after the call, so two
	// coordinators racing to create the CA end up with the same one.
	Blob(ctx context.Context, key string) ([]byte, error)
	PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error)
	// SwapBlob replaces the blob key with value if it still holds old:
	// else nothing is written and the error is ErrBlobChanged
	// (ErrNotFound when there is no such blob).
	SwapBlob(ctx context.Context, key string, old, value []byte) error

	// CreateApprover records a person who may approve commands, by the
	// bcrypt hash of their password; ErrExists when the name is taken.
	CreateApprover(ctx context.Context, a Approver) error
	Approver(ctx context.Context, name string) (Approver, error)
	Approvers(ctx context.Context) ([]Approver, error)
	// SetApproverPassword replaces an approver's password hash and ends
	// their sessions.
	SetApproverPassword(ctx context.Context, name, hash string) error

	// CreateSession records an app session by the hash of its cookie value.
	CreateSession(ctx context.Context, s Session) error
	// SessionByHash returns a session that has not expired at now.
	SessionByHash(ctx context.Context, hash []byte, now time.Time) (Session, error)
	DeleteSession(ctx context.Context, hash []byte) error

	// SaveRequestAudited upserts a command request (body is its JSON) and
	// appends the audit rows that record its change, in one transaction:
	// both are committed or neither is, so the audit never tells of a step
	// the request did not take, nor the request of one the audit lacks. At
	// least one row is required.
	SaveRequestAudited(ctx context.Context, r RequestRecord, steps ...AuditEntry) error
	Request(ctx context.Context, id string) (RequestRecord, error)
	// Requests lists requests with one of the statuses (all when none are
	// given), newest first, at most limit.
	Requests(ctx context.Context, limit int, statuses ...string) ([]RequestRecord, error)
	// CountRequests counts the requests of one MCP token in one status
	// created after since.
	CountRequests(ctx context.Context, token, status string, since time.Time) (int, error)
	// SwapRequestAudited saves a change of a request and the audit rows
	// that record it in one transaction, only if the stored request's
	// status is still expect (the status the change was made from): else
	// nothing is written and the error is ErrConflict (ErrNotFound for no
	// such request), so that two coordinators cannot both approve, or
	// both end, one request. h, with a change to "approved", records the
	// request's hand-off with it; a change to any other status deletes
	// the request's hand-off. On PostgreSQL the commit notifies
	// RequestsChannel with the request's id.
	SwapRequestAudited(ctx context.Context, expect string, r RequestRecord, h *Handoff, steps ...AuditEntry) error
	// CreateRequestLimited records a new request and its audit rows in one
	// transaction, only if its token has fewer than limit pending
	// requests created after since, counted in the same transaction under
	// a lock that every coordinator sharing the store takes; else nothing
	// is written and the error is ErrTooMany. It returns the count.
	CreateRequestLimited(ctx context.Context, r RequestRecord, limit int, since time.Time, steps ...AuditEntry) (int, error)
	// Handoffs lists the hand-offs sealed to a replica (all when replica
	// is ""), oldest first.
	Handoffs(ctx context.Context, replica string) ([]Handoff, error)
	// AppendAudit writes one audit row for a step that changes nothing
	// else (a card shown, a command accepted); callers stop when it fails.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// AppendAuditOnce writes e unless e's request already has a row of
	// e's step, atomically across coordinators sharing the store; written
	// says whether it did.
	AppendAuditOnce(ctx context.Context, e AuditEntry) (written bool, err error)
	// Audit lists audit rows in order, for one request when requestID is set.
	Audit(ctx context.Context, requestID string, limit int) ([]AuditEntry, error)

	Close() error

	// OpenIncident records a new open incident (its ID and EndedAt are
	// ignored) and returns its id; ErrExists when the target already has an
	// open one.
	OpenIncident(ctx context.Context, in Incident) (int64, error)
	// UpdateIncident replaces an open incident's reason and explains;
	// ErrNotFound when no open incident has that id.
	UpdateIncident(ctx context.Context, id int64, reason string, explains []string) error
	// EndIncident closes an open incident at at (never before its start);
	// ErrNotFound when no open incident has that id.
	EndIncident(ctx context.Context, id int64, at time.Time) error
	// OpenIncidents lists the incidents not yet ended, oldest first.
	OpenIncidents(ctx context.Context) ([]Incident, error)
	// Incidents lists incidents, open and ended, newest start first, at most limit.
	Incidents(ctx context.Context, limit int) ([]Incident, error)

	// HeartbeatReplica records that a coordinator is alive at
	// r.HeartbeatAt with the addresses it advertises (registering it on
	// its first beat; its StartedAt is kept from then on), and forgets the
	// replicas silent since before forgetBefore (killed ones never say
	// goodbye).
	HeartbeatReplica(ctx context.Context, r Replica, forgetBefore time.Time) error
	// Replicas lists the coordinators whose last heartbeat is at or after
	// since, first started first.
	Replicas(ctx context.Context, since time.Time) ([]Replica, error)
	// RemoveReplica forgets a coordinator that stops cleanly; removing one
	// that is not there is not an error.
	RemoveReplica(ctx context.Context, id string) error
	// SaveStreamLeases records that replica holds the streams of the
	// held servers (each since its Since) and no longer holds those of
	// released; a release leaves a lease another replica took since
	// alone. Every lease written is stamped changed at now.
	SaveStreamLeases(ctx context.Context, replica string, held []StreamLease, released []string, now time.Time) error
	// StreamLeases returns the leases changed at or after since, released
	// ones (Replica "") included, by server name.
	StreamLeases(ctx context.Context, since time.Time) ([]StreamLease, error)
	// ServersSeenSince returns the servers last seen at or after since,
	// by name: what other replicas wrote of the servers they hold. When
	// wanted is given, only the servers it wants (told their names and
	// when they were last seen) are read whole.
	ServersSeenSince(ctx context.Context, since time.Time, wanted func(name string, lastSeen time.Time) bool) ([]ServerRecord, error)
	// PutProbeChecks records each vantage point's latest check of a
	// resource, keeping a stored check that is newer, and forgets checks
	// older than ProbeChecksKept before now. A check that fails validation
	// is not written, the others are, and the error names it.
	PutProbeChecks(ctx context.Context, checks []ProbeCheck, now time.Time) error
	// ProbeChecks returns the checks made at or after since, by resource
	// and vantage point.
	ProbeChecks(ctx context.Context, since time.Time) ([]ProbeCheck, error)
	// AskProbe records a replica's ask of another for a probe from an
	// agent whose stream that one holds (see ProbeAsk), and forgets asks
	// older than ProbeAsksKept before it was asked.
	AskProbe(ctx context.Context, a ProbeAsk) error
	// ProbeAsks returns the unanswered asks of replica, oldest first.
	ProbeAsks(ctx context.Context, replica string) ([]ProbeAsk, error)
	// AnswerProbe writes the answer to ask a.ID (a's Status, Reason,
	// Latency and Metrics); ErrNotFound when it is gone or answered.
	AnswerProbe(ctx context.Context, a ProbeAsk) error
	// ProbeAnswer returns ask id as it stands; ErrNotFound when gone.
	ProbeAnswer(ctx context.Context, id string) (ProbeAsk, error)
	// ForgetProbeAsk deletes ask id, answered or not.
	ForgetProbeAsk(ctx context.Context, id string) error

	// PutOAuthClient registers an OAuth client, or replaces the one with
	// its id (and lets it sign in again if removed); ErrTooMany when max
	// other live clients are registered.
	PutOAuthClient(ctx context.Context, c OAuthClient, max int) error
	// OAuthClient returns a client, removed or not; ErrNotFound when unknown.
	OAuthClient(ctx context.Context, id string) (OAuthClient, error)
	// OAuthClients lists every client, removed ones included, oldest first.
	OAuthClients(ctx context.Context) ([]OAuthClient, error)
	// RemoveOAuthClient marks a client removed and revokes its tokens.
	RemoveOAuthClient(ctx context.Context, id string, at time.Time) error
	// CreateOAuthCode records an authorization code by its hash.
	CreateOAuthCode(ctx context.Context, c OAuthCode) error
	// UseOAuthCode marks the code used and returns it, whether or not it
	// has expired (the caller checks); a code used before answers
	// ErrReused, having revoked the tokens issued from it.
	UseOAuthCode(ctx context.Context, hash []byte, now time.Time) (OAuthCode, error)
	// IssueOAuthTokens records tokens by their hashes, in one transaction.
	IssueOAuthTokens(ctx context.Context, now time.Time, ts ...OAuthToken) error
	// OAuthTokenByHash returns the token with that hash unless it was
	// revoked, expired or not (the caller checks).
	OAuthTokenByHash(ctx context.Context, hash []byte) (OAuthToken, error)
	// OAuthTokens lists a client's tokens, revoked ones included.
	OAuthTokens(ctx context.Context, client string) ([]OAuthToken, error)
	// RotateOAuthRefresh exchanges a live refresh token for a new access
	// and refresh token of the same grant and returns the old one. A
	// rotated or revoked one answers ErrReused, having revoked every token
	// of its client; an expired or unknown one ErrNotFound.
	RotateOAuthRefresh(ctx context.Context, hash []byte, next OAuthPair, now time.Time) (OAuthToken, error)
	// RevokeOAuthToken revokes a token, and for a refresh token its whole
	// grant; an unknown token is not an error.
	RevokeOAuthToken(ctx context.Context, hash []byte, at time.Time) error
}

// Incident is one spell of a target being a root cause.
type Incident struct {
	ID        int64
	Target    string
	Kind      string
	Reason    string // the target's latest error text
	StartedAt time.Time
	EndedAt   time.Time // zero while open
	Explains  []string  // troubled targets it explains, latest known
}

// Open reports whether the incident has not ended.
func (in Incident) Open() bool { return in.EndedAt.IsZero() }

// Approver is a person who may approve or deny commands in the app.
type Approver struct {
	Name         string
	PasswordHash string // bcrypt
	CreatedAt    time.Time
}

// Session is a logged-in approver in the app, kept by the hash of its cookie.
type Session struct {
	Hash []byte
	// CSRFHash is the sha256 of the session's second secret, which the page
	// sends in a header (see package web); never the secret itself.
	CSRFHash  []byte
	Approver  string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// RequestRecord is a command request as stored; Body is the command
// package's JSON and never holds a secret.
type RequestRecord struct {
	ID        string
	Server    string
	Token     string // the MCP token's name
	Status    string
	CreatedAt time.Time
	Body      []byte
}

// AuditEntry is one step in a command's life.
type AuditEntry struct {
	Seq       int64
	At        time.Time
	RequestID string
	Step      string // requested, shown, approved, denied, expired, dispatched, started, finished, unknown, failed
	Actor     string // who: "token:NAME (client)", "approver:NAME", "agent:SERVER", "coordinator"
	Detail    []byte // JSON, never a secret
}

// JoinToken is a short-lived secret an agent trades for a certificate.
type JoinToken struct {
	Hash      []byte
	CreatedAt time.Time
	ExpiresAt time.Time
	SingleUse bool
}

// Agent is an enrolled agent: a server name bound to a certificate.
type Agent struct {
	Name       string
	Serial     string // hex serial of the current client certificate
	EnrolledAt time.Time
	RevokedAt  time.Time // zero while valid
	// Key is the SHA-256 of the public key it enrolled with (the
	// certificate's SubjectPublicKeyInfo); empty for agents enrolled
	// before it was kept.
	Key []byte
}

// Revoked reports whether the agent's certificate was revoked.
func (a Agent) Revoked() bool { return !a.RevokedAt.IsZero() }

// ServerRecord is what survives a restart of a server's live state.
type ServerRecord struct {
	Name     string
	State    []byte // gridcity.v1.StateUpdate, protobuf binary, merged full state
	Hello    []byte // gridcity.v1.Hello, protobuf binary
	LastSeen time.Time
}

// Scope says what a bearer token may do.
type Scope string

const (
	ScopeOperate Scope = "operate" // every tool
	ScopeRead    Scope = "read"    // read-only tools only
	// ScopeMetrics may scrape /metrics and /metrics/fleet and nothing
	// else: no MCP tool, no resource, no prompt.
	ScopeMetrics Scope = "metrics"
)

// MCP reports whether tokens of the scope may use the MCP endpoint.
func (s Scope) MCP() bool { return s == ScopeOperate || s == ScopeRead }

// Token is an MCP bearer token, kept by hash.
type Token struct {
	Name      string
	Scope     Scope
	Hash      []byte
	CreatedAt time.Time
	RevokedAt time.Time
}

// Open opens the store a coordinator is configured with: the PostgreSQL
// database at url (postgres://…) when it is set, else the SQLite file in
// dir.
func Open(ctx context.Context, url, dir string) (Store, error) {
	switch {
	case url == "":
		return OpenSQLite(ctx, dir)
	case IsPostgresURL(url):
		return OpenPostgres(ctx, url)
	}
	return nil, fmt.Errorf("store URL %s: want postgres://USER:PASSWORD@HOST:PORT/DATABASE, or none for the embedded SQLite in the data directory", RedactURL(url))
}

// AgentsStamp is the count of the enrolled agents and the sums of their
// enrollment and revocation times (Unix ms).
type AgentsStamp struct{ N, Enrolled, Revoked int64 }
