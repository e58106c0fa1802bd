package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// rows is a result set of either engine (database/sql's or pgx's), read
// by the same scanners so that both give back the same records.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// collect reads every row with scan, which calls the row's Scan.
func collect[T any](rs rows, scan func(scan func(dest ...any) error) (T, error)) ([]T, error) {
	var out []T
	for rs.Next() {
		v, err := scan(rs.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

// Each scanner reads the columns its engine's query selects, in order.

// agentColumns: name, serial, enrolled_at, revoked_at.
func scanAgent(scan func(...any) error) (Agent, error) {
	var a Agent
	var enrolled, revoked int64
	err := scan(&a.Name, &a.Serial, &enrolled, &revoked)
	a.EnrolledAt, a.RevokedAt = fromMs(enrolled), fromMs(revoked)
	return a, err
}

// name, state, hello, last_seen.
func scanServer(scan func(...any) error) (ServerRecord, error) {
	var r ServerRecord
	var seen int64
	err := scan(&r.Name, &r.State, &r.Hello, &seen)
	r.LastSeen = fromMs(seen)
	return r, err
}

// name, scope, created_at, revoked_at.
func scanToken(scan func(...any) error) (Token, error) {
	var t Token
	var scope string
	var created, revoked int64
	err := scan(&t.Name, &scope, &created, &revoked)
	t.Scope, t.CreatedAt, t.RevokedAt = Scope(scope), fromMs(created), fromMs(revoked)
	return t, err
}

// name, created_at.
func scanApprover(scan func(...any) error) (Approver, error) {
	var a Approver
	var created int64
	err := scan(&a.Name, &created)
	a.CreatedAt = fromMs(created)
	return a, err
}

// id, server, status, created_at, body.
func scanRequest(scan func(...any) error) (RequestRecord, error) {
	var r RequestRecord
	var created int64
	err := scan(&r.ID, &r.Server, &r.Status, &created, &r.Body)
	r.CreatedAt = fromMs(created)
	return r, err
}

// seq, at, request_id, step, actor, detail.
func scanAudit(scan func(...any) error) (AuditEntry, error) {
	var e AuditEntry
	var at int64
	err := scan(&e.Seq, &at, &e.RequestID, &e.Step, &e.Actor, &e.Detail)
	e.At = fromMs(at)
	return e, err
}

// id, target, kind, reason, started_at, ended_at, explains (a JSON array).
func scanIncident(scan func(...any) error) (Incident, error) {
	var in Incident
	var started, ended int64
	var reason []byte
	var explains string
	if err := scan(&in.ID, &in.Target, &in.Kind, &reason, &started, &ended, &explains); err != nil {
		return in, err
	}
	in.Reason = string(reason)
	in.StartedAt, in.EndedAt = fromMs(started), fromMs(ended)
	in.Explains = []string{}
	if err := json.Unmarshal([]byte(explains), &in.Explains); err != nil {
		return in, fmt.Errorf("incident %d: explains: %w", in.ID, err)
	}
	if in.Explains == nil {
		in.Explains = []string{}
	}
	return in, nil
}

// metricRow is one merged bucket as read, before it is checked: SQLite
// gives NULL for a NaN it was handed.
type metricRow struct {
	p           MetricPoint
	lo, sum, hi sql.NullFloat64
}

// bucket start, metric, n, min, sum, max.
func scanMetric(scan func(...any) error) (metricRow, error) {
	var r metricRow
	var at int64
	err := scan(&at, &r.p.Metric, &r.p.N, &r.lo, &r.sum, &r.hi)
	r.p.At = time.UnixMilli(at).UTC()
	return r, err
}

// metricPoints keeps the buckets of server that any answer can show.
func metricPoints(server string, rs []metricRow) []MetricPoint {
	var out []MetricPoint
	for _, r := range rs {
		if !r.lo.Valid || !r.sum.Valid || !r.hi.Valid {
			continue
		}
		p := r.p
		p.Server, p.Min, p.Sum, p.Max = server, r.lo.Float64, r.sum.Float64, r.hi.Float64
		if p.Check() != nil {
			continue // written by hand or by a bug; no answer can show it
		}
		out = append(out, p)
	}
	return out
}

// incidentsOrEmpty is a list of incidents that is never nil.
func incidentsOrEmpty(in []Incident, err error) ([]Incident, error) {
	if in == nil && err == nil {
		in = []Incident{}
	}
	return in, err
}
