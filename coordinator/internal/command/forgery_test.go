package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// attacker is whoever can write the PostgreSQL database and nothing else:
// a stolen password, a compromised database host, a backup restored with
// changes. It speaks SQL to the store, as psql would.
type attacker struct {
	t    *testing.T
	conn *pgx.Conn
}

func newAttacker(t *testing.T, url string) *attacker {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &attacker{t: t, conn: conn}
}

func (a *attacker) exec(sql string, args ...any) {
	a.t.Helper()
	if _, err := a.conn.Exec(context.Background(), sql, args...); err != nil {
		a.t.Fatalf("%s: %v", sql, err)
	}
}

// forge writes an approved request for web-1 that no one asked for and no
// one approved, with no audit row, and a hand-off of it sealed to the
// replica's public hand-off key (read from the replicas table, where it is
// for anyone to read), then notifies the replicas as a commit would.
func (a *attacker) forge(id, replica, command string) {
	a.t.Helper()
	now := time.Now().UTC()
	body, err := json.Marshal(Request{ID: id, Server: "web-1", Command: command, Reason: "forged", TimeoutSeconds: 30, Client: "claude-code", Token: "laptop",
		RunAs: "root", Status: StatusApproved, CreatedAt: now, ExpiresAt: now.Add(Expiry), DecidedAt: now, DecidedBy: "alice"})
	if err != nil {
		a.t.Fatal(err)
	}
	a.exec(`INSERT INTO requests(id, server, token, status, created_at, body) VALUES ($1, 'web-1', 'laptop', 'approved', $2, $3)`, id, now.UnixMilli(), body)
	var pub []byte
	if err := a.conn.QueryRow(context.Background(), `SELECT handoff_key FROM replicas WHERE id = $1`, replica).Scan(&pub); err != nil {
		a.t.Fatal(err)
	}
	sealed, err := sealApproval(pub, id, Approval{}) // HPKE to a public key: anyone can
	if err != nil {
		a.t.Fatal(err)
	}
	a.exec(`INSERT INTO handoffs(request_id, replica, sealed, created_at) VALUES ($1, $2, $3, $4)`, id, replica, sealed, now.UnixMilli())
	a.exec(`SELECT pg_notify('gridcity_requests', $1)`, id)
}

// testUnseal is the unseal key the tests' replicas are given.
var testUnseal = func() *sealing.Key {
	k, err := sealing.KeyFromBytes(bytes.Repeat([]byte{7}, sealing.KeySize))
	if err != nil {
		panic(err)
	}
	return k
}()

// forged is how many approvals m counted as refused for reason.
func forged(t *testing.T, m *telemetry.Metrics, reason string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "gridcity_forged_approvals_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The reviewer's reproduction: a row written straight into PostgreSQL (an
// approved request and a hand-off sealed to a live replica's registered
// public key) must never run. The replica holding the agent sends
// nothing, ends the request failed saying its approval's authenticator
// did not verify and nothing ran, logs the attempt as an error with the
// request's id, and counts it.
func TestForgedApprovalNeverRuns(t *testing.T) {
	url := pgtest.Database(t)
	metrics := telemetry.New("test")
	b := newReplica(t, url, "b", Config{Reread: time.Hour, Metrics: metrics}, onHere, nil)
	evil := newAttacker(t, url)
	ctx := context.Background()

	evil.forge("cmd_forged", "b", "id")
	b.svc.Changed(ctx, "cmd_forged") // the notification
	b.svc.Changed(ctx, "")           // and the periodic re-read
	if n := b.out.count(); n != 0 {
		t.Fatalf("the replica holding web-1 sent %d commands: %+v; want none", n, b.out.sent)
	}
	got, err := b.svc.Get(ctx, "cmd_forged")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusFailed || !strings.Contains(got.Detail, "authenticator did not verify") || !strings.Contains(got.Detail, "nothing ran") {
		t.Fatalf("the forged request: %s, %q; want failed, saying its authenticator did not verify and nothing ran", got.Status, got.Detail)
	}
	if log := b.log.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "request=cmd_forged") || !strings.Contains(log, "authenticator") {
		t.Fatalf("the attempt is not logged as an error with the request's id:\n%s", log)
	}
	if hs, _ := b.st.Handoffs(ctx, ""); len(hs) != 0 {
		t.Fatalf("hand-offs left: %+v; want the forged one gone with the request's end", hs)
	}
	if n := forged(t, metrics, "unauthenticated"); n != 1 {
		t.Fatalf("gridcity_forged_approvals_total{reason=\"unauthenticated\"} is %v; want 1", n)
	}
	// The audit holds no approval nor dispatch: only the end, by the
	// coordinator that refused it.
	if got := auditOf(t, b.st, "cmd_forged"); got != "failed" {
		t.Fatalf("audit of the forged request %q; want failed alone", got)
	}

	// Nor does one with an authenticator of the attacker's making, nor
	// one with a genuine hand-off's authenticator copied onto it; the
	// genuine hand-off, approved on replica a, runs.
	a := newReplica(t, url, "a", Config{Reread: time.Hour}, heldBy("b"), nil)
	r := a.submit(t, "uptime")
	if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	evil.forge("cmd_forged_2", "b", "id")
	evil.exec(`UPDATE handoffs SET auth = $1 WHERE request_id = 'cmd_forged_2'`, bytes.Repeat([]byte{1}, 32))
	evil.forge("cmd_forged_3", "b", "id")
	evil.exec(`UPDATE handoffs SET auth = (SELECT auth FROM handoffs WHERE request_id = $1) WHERE request_id = 'cmd_forged_3'`, r.ID)
	b.svc.Changed(ctx, "")
	for _, id := range []string{"cmd_forged_2", "cmd_forged_3"} {
		if got, _ := b.svc.Get(ctx, id); got.Status != StatusFailed {
			t.Fatalf("%s: %s; want failed", id, got.Status)
		}
	}
	if n := b.out.count(); n != 1 || b.out.sent[0].RequestId != r.ID {
		t.Fatalf("b sent %+v; want the genuine approval alone", b.out.sent)
	}
	if n := forged(t, metrics, "unauthenticated"); n != 3 {
		t.Fatalf("forged approvals counted %v; want 3", n)
	}
}

// row is a request and its hand-off as the attacker copied them.
type row struct {
	body, sealed, auth []byte
}

// copyApproved copies request id's stored body and its hand-off.
func (a *attacker) copyApproved(id string) row {
	a.t.Helper()
	var r row
	if err := a.conn.QueryRow(context.Background(), `SELECT r.body, h.sealed, h.auth FROM requests r JOIN handoffs h ON h.request_id = r.id WHERE r.id = $1`, id).Scan(&r.body, &r.sealed, &r.auth); err != nil {
		a.t.Fatal(err)
	}
	return r
}

// A genuine approval altered in the store before the holder takes it (the
// command changed), or replayed after it ran (its rows copied, then put
// back as they were), runs nothing: the genuine one ran once.
func TestAlteredOrReplayedApprovalNeverRuns(t *testing.T) {
	url := pgtest.Database(t)
	metrics := telemetry.New("test")
	a := newReplica(t, url, "a", Config{Reread: time.Hour}, heldBy("b"), nil)
	b := newReplica(t, url, "b", Config{Reread: time.Hour, Metrics: metrics}, onHere, nil)
	evil := newAttacker(t, url)
	ctx := context.Background()
	defer func() {
		if u, r := forged(t, metrics, "unauthenticated"), forged(t, metrics, "replayed"); !t.Failed() && (u != 1 || r != 1) {
			t.Errorf("forged approvals counted: %v unauthenticated, %v replayed; want 1 each", u, r)
		}
	}()

	t.Run("altered", func(t *testing.T) {
		r := a.submit(t, "uptime")
		if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
			t.Fatal(err)
		}
		var stored Request
		if err := json.Unmarshal(evil.copyApproved(r.ID).body, &stored); err != nil {
			t.Fatal(err)
		}
		stored.Command = "id"
		body, _ := json.Marshal(stored)
		evil.exec(`UPDATE requests SET body = $1 WHERE id = $2`, body, r.ID)
		b.svc.Changed(ctx, r.ID)
		if n := b.out.count(); n != 0 {
			t.Fatalf("b sent %+v; want nothing", b.out.sent)
		}
		if got, _ := b.svc.Get(ctx, r.ID); got.Status != StatusFailed || !strings.Contains(got.Detail, "authenticator did not verify") {
			t.Fatalf("the altered request: %s, %q; want failed", got.Status, got.Detail)
		}
	})

	t.Run("replayed", func(t *testing.T) {
		sent := b.out.count()
		r := a.submit(t, "uptime # 2")
		if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
			t.Fatal(err)
		}
		copied := evil.copyApproved(r.ID)
		b.svc.Changed(ctx, r.ID)
		if b.out.count() != sent+1 {
			t.Fatalf("b sent %d; want the genuine approval once", b.out.count()-sent)
		}
		b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED})
		if got, _ := b.svc.Get(ctx, r.ID); got.Status != StatusCompleted {
			t.Fatalf("the genuine run: %s; want completed", got.Status)
		}
		// Put back as it was when approved, and notified.
		evil.exec(`UPDATE requests SET status = 'approved', body = $1 WHERE id = $2`, copied.body, r.ID)
		evil.exec(`INSERT INTO handoffs(request_id, replica, sealed, created_at, auth) VALUES ($1, 'b', $2, $3, $4)`, r.ID, copied.sealed, time.Now().UnixMilli(), copied.auth)
		b.svc.Changed(ctx, r.ID)
		if n := b.out.count() - sent; n != 1 {
			t.Fatalf("b sent the command %d times; want once, the replay refused", n)
		}
		if got, _ := b.svc.Get(ctx, r.ID); got.Status != StatusFailed || !strings.Contains(got.Detail, "nothing ran") {
			t.Fatalf("the replayed request: %s, %q; want failed, saying nothing ran", got.Status, got.Detail)
		}
	})
}
