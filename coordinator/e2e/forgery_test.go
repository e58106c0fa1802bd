package e2e

import (
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestForgedApprovalRunsNothing is the review's forgery against the real
// binaries: three replicas on one PostgreSQL and a real agent whose stream
// replica B holds. Whoever can write the database (and nothing else)
// writes an approved request for the agent's server, with no audit row,
// and a hand-off of it sealed with HPKE to B's public hand-off key (read
// from the replicas table, as anyone with the database can), and notifies
// the replicas as a commit does. The command would leave a file; it never
// appears. The request ends failed saying nothing ran, its audit holds no
// approval nor dispatch, and B logs the attempt as an error with the
// request's id and counts it on /metrics.
func TestForgedApprovalRunsNothing(t *testing.T) {
	t.Parallel()
	f := startHAFleet(t, "ha-forged-1")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var replica string
	var pub []byte
	if err := conn.QueryRow(ctx, `SELECT id, handoff_key FROM replicas WHERE grpc_addr = $1`, f.b.grpc).Scan(&replica, &pub); err != nil {
		t.Fatal(err)
	}

	marker := filepath.Join(t.TempDir(), "forged-ran")
	const id = "cmd_f0f0f0f0f0f0f0f0f0f0"
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{"id": id, "server": f.agent, "command": "touch " + marker, "reason": "forged", "timeoutSeconds": 30,
		"client": "e2e-claude", "token": "local", "runAs": "root", "status": "approved", "createdAt": now, "expiresAt": now.Add(5 * time.Minute),
		"decidedAt": now, "decidedBy": "admin", "stdout": map[string]any{}, "stderr": map[string]any{}})
	kem := hpke.DHKEM(ecdh.X25519())
	pk, err := kem.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("gridcity hand-off v1\x00"+id), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO requests(id, server, token, status, created_at, body) VALUES ($1, $2, 'local', 'approved', $3, $4)`, []any{id, f.agent, now.UnixMilli(), body}},
		{`INSERT INTO handoffs(request_id, replica, sealed, created_at) VALUES ($1, $2, $3, $4)`, []any{id, replica, sealed, now.UnixMilli()}},
		{`SELECT pg_notify('gridcity_requests', $1)`, []any{id}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}

	var detail string
	eventually(t, 20*time.Second, "the forged request ended", func() error {
		var status string
		var raw []byte
		if err := conn.QueryRow(ctx, `SELECT status, body FROM requests WHERE id = $1`, id).Scan(&status, &raw); err != nil {
			return err
		}
		if status == "approved" {
			return fmt.Errorf("still approved")
		}
		var r struct{ Detail string }
		json.Unmarshal(raw, &r)
		if status != "failed" || !strings.Contains(r.Detail, "authenticator did not verify") || !strings.Contains(r.Detail, "nothing ran") {
			return fmt.Errorf("it is %s (%q); want failed, saying the authenticator did not verify and nothing ran", status, r.Detail)
		}
		detail = r.Detail
		return nil
	})
	t.Logf("the forged request: failed: %s", detail)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the forged command ran on the agent's host (%v)", err)
	}
	if steps := f.a.auditSteps(t, id); steps != "failed" {
		t.Fatalf("audit of the forged request %q; want its end alone", steps)
	}
	if log := f.b.p.out.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "refused an approved command") || !strings.Contains(log, "request="+id) {
		t.Fatalf("replica B does not log the attempt as an error with the request's id:\n%s", log)
	}
	_, metrics := scrape(t, "http://"+f.b.http+"/metrics", "")
	if n, _ := sample(families(t, metrics), "gridcity_forged_approvals_total", "reason", "unauthenticated"); n != 1 {
		t.Fatalf("gridcity_forged_approvals_total{reason=\"unauthenticated\"} on B is %v; want 1", n)
	}
}
