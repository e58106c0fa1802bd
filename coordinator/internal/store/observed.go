// Code written from the Store interface by a one-off script; the compiler
// checks that Observed still implements Store whenever the interface grows.

package store

import (
	"context"
	"time"
)

// Observer is told of every store operation: its name, how long it took
// and its error (nil on success).
type Observer func(op string, took time.Duration, err error)

// Observed is a Store that tells obs of every operation, for the
// coordinator's metrics. It holds the store rather than embedding it, so
// that a method added to Store fails to compile here until it is observed.
type Observed struct {
	s   Store
	obs Observer
}

var _ Store = (*Observed)(nil)

// Observe wraps s so that obs sees every operation.
func Observe(s Store, obs Observer) *Observed { return &Observed{s: s, obs: obs} }

// Unwrap returns the store Observed wraps.
func (o *Observed) Unwrap() Store { return o.s }

func (o *Observed) done(op string, start time.Time, err error) { o.obs(op, time.Since(start), err) }

func (o *Observed) CreateJoinToken(ctx context.Context, t JoinToken) error {
	start := time.Now()
	err := o.s.CreateJoinToken(ctx, t)
	o.done("CreateJoinToken", start, err)
	return err
}

func (o *Observed) Enroll(ctx context.Context, tokenHash []byte, now time.Time, a Agent) (again bool, err error) {
	start := time.Now()
	v, err := o.s.Enroll(ctx, tokenHash, now, a)
	o.done("Enroll", start, err)
	return v, err
}

func (o *Observed) Agent(ctx context.Context, name string) (Agent, error) {
	start := time.Now()
	v, err := o.s.Agent(ctx, name)
	o.done("Agent", start, err)
	return v, err
}

func (o *Observed) AgentsStamp(ctx context.Context) (AgentsStamp, error) {
	start := time.Now()
	v, err := o.s.AgentsStamp(ctx)
	o.done("AgentsStamp", start, err)
	return v, err
}

func (o *Observed) Agents(ctx context.Context) ([]Agent, error) {
	start := time.Now()
	v, err := o.s.Agents(ctx)
	o.done("Agents", start, err)
	return v, err
}

func (o *Observed) RevokeAgent(ctx context.Context, name string, at time.Time) error {
	start := time.Now()
	err := o.s.RevokeAgent(ctx, name, at)
	o.done("RevokeAgent", start, err)
	return err
}

func (o *Observed) SaveServers(ctx context.Context, servers []ServerRecord) error {
	start := time.Now()
	err := o.s.SaveServers(ctx, servers)
	o.done("SaveServers", start, err)
	return err
}

func (o *Observed) Servers(ctx context.Context) ([]ServerRecord, error) {
	start := time.Now()
	v, err := o.s.Servers(ctx)
	o.done("Servers", start, err)
	return v, err
}

func (o *Observed) AppendMetrics(ctx context.Context, points []MetricPoint, now time.Time, keep MetricRetention) error {
	start := time.Now()
	err := o.s.AppendMetrics(ctx, points, now, keep)
	o.done("AppendMetrics", start, err)
	return err
}

func (o *Observed) MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]MetricPoint, error) {
	start := time.Now()
	v, err := o.s.MetricHistory(ctx, server, step, since, every)
	o.done("MetricHistory", start, err)
	return v, err
}

func (o *Observed) CreateToken(ctx context.Context, t Token) error {
	start := time.Now()
	err := o.s.CreateToken(ctx, t)
	o.done("CreateToken", start, err)
	return err
}

func (o *Observed) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	start := time.Now()
	v, err := o.s.TokenByHash(ctx, hash)
	o.done("TokenByHash", start, err)
	return v, err
}

func (o *Observed) Tokens(ctx context.Context) ([]Token, error) {
	start := time.Now()
	v, err := o.s.Tokens(ctx)
	o.done("Tokens", start, err)
	return v, err
}

func (o *Observed) RevokeToken(ctx context.Context, name string, at time.Time) error {
	start := time.Now()
	err := o.s.RevokeToken(ctx, name, at)
	o.done("RevokeToken", start, err)
	return err
}

func (o *Observed) Blob(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	v, err := o.s.Blob(ctx, key)
	o.done("Blob", start, err)
	return v, err
}

func (o *Observed) PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error) {
	start := time.Now()
	v, err := o.s.PutBlobIfAbsent(ctx, key, value)
	o.done("PutBlobIfAbsent", start, err)
	return v, err
}

func (o *Observed) SwapBlob(ctx context.Context, key string, old, value []byte) error {
	start := time.Now()
	err := o.s.SwapBlob(ctx, key, old, value)
	o.done("SwapBlob", start, err)
	return err
}

func (o *Observed) CreateApprover(ctx context.Context, a Approver) error {
	start := time.Now()
	err := o.s.CreateApprover(ctx, a)
	o.done("CreateApprover", start, err)
	return err
}

func (o *Observed) Approver(ctx context.Context, name string) (Approver, error) {
	start := time.Now()
	v, err := o.s.Approver(ctx, name)
	o.done("Approver", start, err)
	return v, err
}

func (o *Observed) Approvers(ctx context.Context) ([]Approver, error) {
	start := time.Now()
	v, err := o.s.Approvers(ctx)
	o.done("Approvers", start, err)
	return v, err
}

func (o *Observed) SetApproverPassword(ctx context.Context, name, hash string) error {
	start := time.Now()
	err := o.s.SetApproverPassword(ctx, name, hash)
	o.done("SetApproverPassword", start, err)
	return err
}

func (o *Observed) CreateSession(ctx context.Context, s Session) error {
	start := time.Now()
	err := o.s.CreateSession(ctx, s)
	o.done("CreateSession", start, err)
	return err
}

func (o *Observed) SessionByHash(ctx context.Context, hash []byte, now time.Time) (Session, error) {
	start := time.Now()
	v, err := o.s.SessionByHash(ctx, hash, now)
	o.done("SessionByHash", start, err)
	return v, err
}

func (o *Observed) DeleteSession(ctx context.Context, hash []byte) error {
	start := time.Now()
	err := o.s.DeleteSession(ctx, hash)
	o.done("DeleteSession", start, err)
	return err
}

func (o *Observed) SaveRequestAudited(ctx context.Context, r RequestRecord, steps ...AuditEntry) error {
	start := time.Now()
	err := o.s.SaveRequestAudited(ctx, r, steps...)
	o.done("SaveRequestAudited", start, err)
	return err
}

func (o *Observed) Request(ctx context.Context, id string) (RequestRecord, error) {
	start := time.Now()
	v, err := o.s.Request(ctx, id)
	o.done("Request", start, err)
	return v, err
}

func (o *Observed) Requests(ctx context.Context, limit int, statuses ...string) ([]RequestRecord, error) {
	start := time.Now()
	v, err := o.s.Requests(ctx, limit, statuses...)
	o.done("Requests", start, err)
	return v, err
}

func (o *Observed) CountRequests(ctx context.Context, token, status string, since time.Time) (int, error) {
	start := time.Now()
	v, err := o.s.CountRequests(ctx, token, status, since)
	o.done("CountRequests", start, err)
	return v, err
}

func (o *Observed) SwapRequestAudited(ctx context.Context, expect string, r RequestRecord, h *Handoff, steps ...AuditEntry) error {
	start := time.Now()
	err := o.s.SwapRequestAudited(ctx, expect, r, h, steps...)
	o.done("SwapRequestAudited", start, err)
	return err
}

func (o *Observed) CreateRequestLimited(ctx context.Context, r RequestRecord, limit int, since time.Time, steps ...AuditEntry) (int, error) {
	start := time.Now()
	v, err := o.s.CreateRequestLimited(ctx, r, limit, since, steps...)
	o.done("CreateRequestLimited", start, err)
	return v, err
}

func (o *Observed) Handoffs(ctx context.Context, replica string) ([]Handoff, error) {
	start := time.Now()
	v, err := o.s.Handoffs(ctx, replica)
	o.done("Handoffs", start, err)
	return v, err
}

func (o *Observed) AppendAudit(ctx context.Context, e AuditEntry) error {
	start := time.Now()
	err := o.s.AppendAudit(ctx, e)
	o.done("AppendAudit", start, err)
	return err
}

func (o *Observed) Audit(ctx context.Context, requestID string, limit int) ([]AuditEntry, error) {
	start := time.Now()
	v, err := o.s.Audit(ctx, requestID, limit)
	o.done("Audit", start, err)
	return v, err
}

func (o *Observed) Close() error { return o.s.Close() }

func (o *Observed) OpenIncident(ctx context.Context, in Incident) (int64, error) {
	start := time.Now()
	v, err := o.s.OpenIncident(ctx, in)
	o.done("OpenIncident", start, err)
	return v, err
}

func (o *Observed) UpdateIncident(ctx context.Context, id int64, reason string, explains []string) error {
	start := time.Now()
	err := o.s.UpdateIncident(ctx, id, reason, explains)
	o.done("UpdateIncident", start, err)
	return err
}

func (o *Observed) EndIncident(ctx context.Context, id int64, at time.Time) error {
	start := time.Now()
	err := o.s.EndIncident(ctx, id, at)
	o.done("EndIncident", start, err)
	return err
}

func (o *Observed) OpenIncidents(ctx context.Context) ([]Incident, error) {
	start := time.Now()
	v, err := o.s.OpenIncidents(ctx)
	o.done("OpenIncidents", start, err)
	return v, err
}

func (o *Observed) Incidents(ctx context.Context, limit int) ([]Incident, error) {
	start := time.Now()
	v, err := o.s.Incidents(ctx, limit)
	o.done("Incidents", start, err)
	return v, err
}

func (o *Observed) HeartbeatReplica(ctx context.Context, r Replica, forgetBefore time.Time) error {
	start := time.Now()
	err := o.s.HeartbeatReplica(ctx, r, forgetBefore)
	o.done("HeartbeatReplica", start, err)
	return err
}

func (o *Observed) Replicas(ctx context.Context, since time.Time) ([]Replica, error) {
	start := time.Now()
	v, err := o.s.Replicas(ctx, since)
	o.done("Replicas", start, err)
	return v, err
}

func (o *Observed) RemoveReplica(ctx context.Context, id string) error {
	start := time.Now()
	err := o.s.RemoveReplica(ctx, id)
	o.done("RemoveReplica", start, err)
	return err
}

func (o *Observed) SaveStreamLeases(ctx context.Context, replica string, held []StreamLease, released []string, now time.Time) error {
	start := time.Now()
	err := o.s.SaveStreamLeases(ctx, replica, held, released, now)
	o.done("SaveStreamLeases", start, err)
	return err
}

func (o *Observed) StreamLeases(ctx context.Context, since time.Time) ([]StreamLease, error) {
	start := time.Now()
	v, err := o.s.StreamLeases(ctx, since)
	o.done("StreamLeases", start, err)
	return v, err
}

func (o *Observed) ServersSeenSince(ctx context.Context, since time.Time, wanted func(name string, lastSeen time.Time) bool) ([]ServerRecord, error) {
	start := time.Now()
	v, err := o.s.ServersSeenSince(ctx, since, wanted)
	o.done("ServersSeenSince", start, err)
	return v, err
}

func (o *Observed) PutProbeChecks(ctx context.Context, checks []ProbeCheck, now time.Time) error {
	start := time.Now()
	err := o.s.PutProbeChecks(ctx, checks, now)
	o.done("PutProbeChecks", start, err)
	return err
}

func (o *Observed) ProbeChecks(ctx context.Context, since time.Time) ([]ProbeCheck, error) {
	start := time.Now()
	v, err := o.s.ProbeChecks(ctx, since)
	o.done("ProbeChecks", start, err)
	return v, err
}

func (o *Observed) AskProbe(ctx context.Context, a ProbeAsk) error {
	start := time.Now()
	err := o.s.AskProbe(ctx, a)
	o.done("AskProbe", start, err)
	return err
}

func (o *Observed) ProbeAsks(ctx context.Context, replica string) ([]ProbeAsk, error) {
	start := time.Now()
	v, err := o.s.ProbeAsks(ctx, replica)
	o.done("ProbeAsks", start, err)
	return v, err
}

func (o *Observed) AnswerProbe(ctx context.Context, a ProbeAsk) error {
	start := time.Now()
	err := o.s.AnswerProbe(ctx, a)
	o.done("AnswerProbe", start, err)
	return err
}

func (o *Observed) ProbeAnswer(ctx context.Context, id string) (ProbeAsk, error) {
	start := time.Now()
	v, err := o.s.ProbeAnswer(ctx, id)
	o.done("ProbeAnswer", start, err)
	return v, err
}

func (o *Observed) ForgetProbeAsk(ctx context.Context, id string) error {
	start := time.Now()
	err := o.s.ForgetProbeAsk(ctx, id)
	o.done("ForgetProbeAsk", start, err)
	return err
}

func (o *Observed) AppendAuditOnce(ctx context.Context, e AuditEntry) (bool, error) {
	start := time.Now()
	v, err := o.s.AppendAuditOnce(ctx, e)
	o.done("AppendAuditOnce", start, err)
	return v, err
}

func (o *Observed) PutOAuthClient(ctx context.Context, c OAuthClient, max int) error {
	start := time.Now()
	err := o.s.PutOAuthClient(ctx, c, max)
	o.done("PutOAuthClient", start, err)
	return err
}

func (o *Observed) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	start := time.Now()
	v, err := o.s.OAuthClient(ctx, id)
	o.done("OAuthClient", start, err)
	return v, err
}

func (o *Observed) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	start := time.Now()
	v, err := o.s.OAuthClients(ctx)
	o.done("OAuthClients", start, err)
	return v, err
}

func (o *Observed) RemoveOAuthClient(ctx context.Context, id string, at time.Time) error {
	start := time.Now()
	err := o.s.RemoveOAuthClient(ctx, id, at)
	o.done("RemoveOAuthClient", start, err)
	return err
}

func (o *Observed) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	start := time.Now()
	err := o.s.CreateOAuthCode(ctx, c)
	o.done("CreateOAuthCode", start, err)
	return err
}

func (o *Observed) UseOAuthCode(ctx context.Context, hash []byte, now time.Time) (OAuthCode, error) {
	start := time.Now()
	v, err := o.s.UseOAuthCode(ctx, hash, now)
	o.done("UseOAuthCode", start, err)
	return v, err
}

func (o *Observed) IssueOAuthTokens(ctx context.Context, now time.Time, ts ...OAuthToken) error {
	start := time.Now()
	err := o.s.IssueOAuthTokens(ctx, now, ts...)
	o.done("IssueOAuthTokens", start, err)
	return err
}

func (o *Observed) OAuthTokenByHash(ctx context.Context, hash []byte) (OAuthToken, error) {
	start := time.Now()
	v, err := o.s.OAuthTokenByHash(ctx, hash)
	o.done("OAuthTokenByHash", start, err)
	return v, err
}

func (o *Observed) OAuthTokens(ctx context.Context, client string) ([]OAuthToken, error) {
	start := time.Now()
	v, err := o.s.OAuthTokens(ctx, client)
	o.done("OAuthTokens", start, err)
	return v, err
}

func (o *Observed) RotateOAuthRefresh(ctx context.Context, hash []byte, next OAuthPair, now time.Time) (OAuthToken, error) {
	start := time.Now()
	v, err := o.s.RotateOAuthRefresh(ctx, hash, next, now)
	o.done("RotateOAuthRefresh", start, err)
	return v, err
}

func (o *Observed) RevokeOAuthToken(ctx context.Context, hash []byte, at time.Time) error {
	start := time.Now()
	err := o.s.RevokeOAuthToken(ctx, hash, at)
	o.done("RevokeOAuthToken", start, err)
	return err
}
