package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestApproversAndSessions: a new password ends the approver's sessions,
// an expired session is not found, names are unique.
func TestApproversAndSessions(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_700_000_000_000)
		for _, name := range []string{"bob", "alice"} {
			if err := s.CreateApprover(ctx, Approver{Name: name, PasswordHash: "h-" + name, CreatedAt: now}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateApprover(ctx, Approver{Name: "bob", PasswordHash: "x", CreatedAt: now}); !errors.Is(err, ErrExists) {
			t.Fatalf("second bob: %v; want ErrExists", err)
		}
		if as, err := s.Approvers(ctx); err != nil || len(as) != 2 || as[0].Name != "alice" || as[1].Name != "bob" || !as[1].CreatedAt.Equal(now) {
			t.Fatalf("approvers %+v, %v; want alice then bob", as, err)
		}
		if a, err := s.Approver(ctx, "bob"); err != nil || a.PasswordHash != "h-bob" {
			t.Fatalf("bob %+v, %v", a, err)
		}
		if _, err := s.Approver(ctx, "carol"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("carol: %v; want ErrNotFound", err)
		}
		for i, name := range []string{"bob", "bob", "alice"} {
			if err := s.CreateSession(ctx, Session{Hash: []byte{byte(i)}, CSRFHash: []byte("c"), Approver: name, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateSession(ctx, Session{Hash: []byte("no csrf"), Approver: "bob", ExpiresAt: now.Add(time.Hour)}); err == nil {
			t.Error("a session without a CSRF hash was recorded")
		}
		if se, err := s.SessionByHash(ctx, []byte{0}, now); err != nil || se.Approver != "bob" || string(se.CSRFHash) != "c" || !se.ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("session %+v, %v", se, err)
		}
		if _, err := s.SessionByHash(ctx, []byte{0}, now.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired session: %v; want ErrNotFound", err)
		}
		if err := s.SetApproverPassword(ctx, "bob", "h2"); err != nil {
			t.Fatal(err)
		}
		for _, h := range []byte{0, 1} {
			if _, err := s.SessionByHash(ctx, []byte{h}, now); !errors.Is(err, ErrNotFound) {
				t.Errorf("bob's session %d after a new password: %v; want ErrNotFound", h, err)
			}
		}
		if _, err := s.SessionByHash(ctx, []byte{2}, now); err != nil {
			t.Errorf("alice's session after bob's new password: %v; want it kept", err)
		}
		if err := s.DeleteSession(ctx, []byte{2}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SessionByHash(ctx, []byte{2}, now); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted session: %v; want ErrNotFound", err)
		}
		if err := s.SetApproverPassword(ctx, "carol", "h"); !errors.Is(err, ErrNotFound) {
			t.Errorf("carol's password: %v; want ErrNotFound", err)
		}
	})
}

// TestRequestsAndAudit: requests newest first, by status, within a limit
// (a negative one is none); the audit in order, for one request or all.
func TestRequestsAndAudit(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		base := time.UnixMilli(1_700_000_000_000)
		for i, st := range []string{"pending", "denied", "pending", "completed"} {
			id := fmt.Sprintf("cmd_%d", i)
			r := RequestRecord{ID: id, Server: "web-1", Token: "laptop", Status: "pending", CreatedAt: base.Add(time.Duration(i) * time.Second), Body: []byte(`{"n":` + fmt.Sprint(i) + `}`)}
			if err := s.SaveRequestAudited(ctx, r, step(id, "requested", "{}")); err != nil {
				t.Fatal(err)
			}
			if st != "pending" {
				r.Status, r.Body = st, []byte(`{"done":true}`)
				if err := s.SaveRequestAudited(ctx, r, step(id, "decided", `{"a":1}`), step(id, st, "{}")); err != nil {
					t.Fatal(err)
				}
			}
		}
		ids := func(rs []RequestRecord) string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID+":"+r.Status)
			}
			return strings.Join(out, ",")
		}
		for _, tt := range []struct {
			limit    int
			statuses []string
			want     string
		}{
			{10, nil, "cmd_3:completed,cmd_2:pending,cmd_1:denied,cmd_0:pending"},
			{-1, nil, "cmd_3:completed,cmd_2:pending,cmd_1:denied,cmd_0:pending"},
			{2, nil, "cmd_3:completed,cmd_2:pending"},
			{0, nil, ""},
			{10, []string{"pending"}, "cmd_2:pending,cmd_0:pending"},
			{10, []string{"denied", "completed"}, "cmd_3:completed,cmd_1:denied"},
		} {
			rs, err := s.Requests(ctx, tt.limit, tt.statuses...)
			if got := ids(rs); err != nil || got != tt.want {
				t.Errorf("Requests(%d, %v) = %s, %v; want %s", tt.limit, tt.statuses, got, err, tt.want)
			}
		}
		r, err := s.Request(ctx, "cmd_1")
		if err != nil || r.Status != "denied" || string(r.Body) != `{"done":true}` || r.Server != "web-1" || !r.CreatedAt.Equal(base.Add(time.Second)) {
			t.Fatalf("cmd_1 = %+v, %v", r, err)
		}
		if _, err := s.Request(ctx, "cmd_9"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown request: %v; want ErrNotFound", err)
		}
		if got := auditSteps(t, s, "cmd_1"); got != "requested,decided,denied" {
			t.Errorf("audit of cmd_1: %s", got)
		}
		all, err := s.Audit(ctx, "", -1)
		if err != nil || len(all) != 8 {
			t.Fatalf("whole audit: %d rows, %v; want 8", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].Seq <= all[i-1].Seq {
				t.Fatalf("audit out of order: %d after %d", all[i].Seq, all[i-1].Seq)
			}
		}
		if e := all[len(all)-1]; e.RequestID != "cmd_3" || e.Step != "completed" || e.Actor != "test" || string(e.Detail) != "{}" {
			t.Errorf("last audit row %+v", e)
		}
		if some, _ := s.Audit(ctx, "", 3); len(some) != 3 || some[0].Seq != all[0].Seq {
			t.Errorf("audit limit 3: %+v", some)
		}
	})
}

// TestSaveRequestAuditedIsOneTransaction: when the request's change is
// refused, the audit rows written with it are not kept, on every engine.
func TestSaveRequestAuditedIsOneTransaction(t *testing.T) {
	eachEngineWith(t, func(t *testing.T, e engine, s Store) {
		ctx := context.Background()
		rec := RequestRecord{ID: "cmd_a", Server: "web-1", Token: "laptop", Status: "pending", CreatedAt: time.Now(), Body: []byte(`{"status":"pending"}`)}
		if err := s.SaveRequestAudited(ctx, rec, step("cmd_a", "requested", "{}")); err != nil {
			t.Fatal(err)
		}
		e.refuseApproval(t, s)
		approved := rec
		approved.Status, approved.Body = "approved", []byte(`{"status":"approved"}`)
		err := s.SaveRequestAudited(ctx, approved, step("cmd_a", "shown", "{}"), step("cmd_a", "approved", "{}"))
		if err == nil || !strings.Contains(err.Error(), "save request cmd_a (approved)") {
			t.Fatalf("a refused approval: %v; want its error, naming the request and the step", err)
		}
		if got := auditSteps(t, s, "cmd_a"); got != "requested" {
			t.Fatalf("audit steps %q; want only requested", got)
		}
		if got, _ := s.Request(ctx, "cmd_a"); got.Status != "pending" {
			t.Fatalf("status %s; want pending", got.Status)
		}
	})
}

// TestOneNameEnrollsOnce: agents racing to enroll one name with tokens of
// their own and keys of their own: one is enrolled, the others are told
// the name is taken, and the agent's key is the winner's.
func TestOneNameEnrollsOnce(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		const n, rounds = 8, 10
		for i := range n * rounds {
			if err := s.CreateJoinToken(ctx, JoinToken{Hash: []byte(fmt.Sprint("tok-", i)), CreatedAt: now, ExpiresAt: now.Add(time.Hour), SingleUse: true}); err != nil {
				t.Fatal(err)
			}
		}
		// Rounds, so that the later ones race on connections already open.
		for r := range rounds {
			name := fmt.Sprint("web-", r)
			var wg sync.WaitGroup
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					_, errs[i] = s.Enroll(ctx, []byte(fmt.Sprint("tok-", r*n+i)), now, Agent{Name: name, Serial: fmt.Sprint(i), EnrolledAt: now, Key: []byte(fmt.Sprint("key-", i))})
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("%s: agents %d and %d both enrolled it", name, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, ErrNameTaken):
					t.Fatalf("%s: agent %d: %v; want ErrNameTaken", name, i, err)
				}
			}
			a, err := s.Agent(ctx, name)
			if err != nil || winner < 0 || a.Serial != fmt.Sprint(winner) || string(a.Key) != fmt.Sprint("key-", winner) {
				t.Fatalf("%s = %+v, %v; want the winner's (%d) serial and key", name, a, err, winner)
			}
		}
	})
}

// TestOneTokenNamePerLiveToken: tokens racing for one name: one is made.
func TestOneTokenNamePerLiveToken(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = s.CreateToken(ctx, Token{Name: "cursor", Scope: ScopeRead, Hash: []byte(fmt.Sprint("h", i)), CreatedAt: time.Now()})
			})
		}
		close(start)
		wg.Wait()
		made := 0
		for i, err := range errs {
			if err == nil {
				made++
			} else if !errors.Is(err, ErrExists) {
				t.Errorf("token %d: %v; want ErrExists", i, err)
			}
		}
		if ts, _ := s.Tokens(ctx); made != 1 || len(ts) != 1 {
			t.Fatalf("%d tokens made, %d stored; want 1", made, len(ts))
		}
	})
}

// TestIncidentReasonKeepsItsBytes: a probe's error text is the fleet's,
// in whatever bytes it came: invalid UTF-8 and NUL are kept as they are.
func TestIncidentReasonKeepsItsBytes(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		reason := "EOF from \xff\xfe\x00 server"
		id, err := s.OpenIncident(ctx, Incident{Target: "db", Kind: "postgres", Reason: reason, StartedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if in, err := s.OpenIncidents(ctx); err != nil || len(in) != 1 || in[0].Reason != reason {
			t.Fatalf("open incidents %+v, %v; want the reason's bytes back", in, err)
		}
		if err := s.UpdateIncident(ctx, id, reason+"\x00again", nil); err != nil {
			t.Fatal(err)
		}
		if in, _ := s.Incidents(ctx, -1); len(in) != 1 || in[0].Reason != reason+"\x00again" {
			t.Fatalf("incidents %+v; want the updated reason's bytes", in)
		}
	})
}

// AgentsStamp changes with every enrollment, enrollment again and
// revocation, and only then.
func TestAgentsStamp(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_750_000_000_000)
		stamp := func() AgentsStamp {
			t.Helper()
			st, err := s.AgentsStamp(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		seen := map[AgentsStamp]string{stamp(): "empty"}
		changed := func(what string) {
			t.Helper()
			st := stamp()
			if was, ok := seen[st]; ok {
				t.Fatalf("stamp %+v after %s is the one after %s", st, what, was)
			}
			seen[st] = what
		}
		enroll := func(tok, name, key string, at time.Time) {
			t.Helper()
			if err := s.CreateJoinToken(ctx, JoinToken{Hash: []byte(tok), CreatedAt: at, ExpiresAt: at.Add(time.Hour), SingleUse: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Enroll(ctx, []byte(tok), at, Agent{Name: name, Serial: tok, EnrolledAt: at, Key: []byte(key)}); err != nil {
				t.Fatal(err)
			}
		}
		enroll("t1", "web-1", "k1", now)
		changed("web-1 enrolled")
		enroll("t2", "web-2", "k2", now.Add(time.Second))
		changed("web-2 enrolled")
		if before, after := stamp(), stamp(); before != after {
			t.Fatalf("stamp changed with nothing done: %+v, %+v", before, after)
		}
		if err := s.RevokeAgent(ctx, "web-1", now.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		changed("web-1 revoked")
		enroll("t3", "web-1", "k3", now.Add(3*time.Second))
		changed("web-1 enrolled anew")
	})
}
