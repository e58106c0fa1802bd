package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestServeOnPostgres runs `gridcity serve --store postgres://…` with a real
// agent, then a second coordinator on the same database with a new, empty
// --data directory and the same unseal key: everything the coordinator
// must not lose is in PostgreSQL, so the agent is back online with the
// certificate the first one issued (the CA is in the store, sealed), and
// the tokens and an approver made beside the first one still work.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t)}
	serve := func() {
		c.p = start(t, "coordinator", "gridcity", "serve", "--data", c.data, "--store", url, "--unseal-key-file", unsealKeyFor(t, url),
			"--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc, "--log-level", "debug")
		c.waitHealthy()
	}
	serve()
	cli := func(args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"gridcity"}, args...), "--data", c.data, "--store", url)...)
		if err != nil {
			t.Fatalf("gridcity %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var local, ops struct{ Token string }
	if err := json.Unmarshal([]byte(cli("mcp", "--json")), &local); err != nil || local.Token == "" {
		t.Fatalf("mcp --json: %v", err)
	}
	if err := json.Unmarshal([]byte(cli("token", "create", "ops", "--scope", "read", "--json")), &ops); err != nil || ops.Token == "" {
		t.Fatalf("token create --json: %v", err)
	}
	var alice struct{ Name, Password string }
	if err := json.Unmarshal([]byte(cli("approver", "add", "alice", "--json")), &alice); err != nil || alice.Password == "" {
		t.Fatalf("approver add --json: %v", err)
	}
	join := c.joinLine("--store", url)
	startAgent(t, c, "pg-web-1", t.TempDir(), join)
	c.waitStatus(local.Token, "pg-web-1", "online", 20*time.Second)

	// A new coordinator on the same database, with nothing from the first
	// one's data directory.
	c.p.stop()
	c.data = t.TempDir()
	serve()
	for name, tok := range map[string]string{"local": local.Token, "ops": ops.Token} {
		if _, err := c.servers(tok); err != nil {
			t.Fatalf("the %s token after the restart: %v", name, err)
		}
	}
	c.waitStatus(ops.Token, "pg-web-1", "online", 60*time.Second)
	var agents []struct{ Name, RevokedAt string }
	if err := json.Unmarshal([]byte(cli("agents", "list", "--json")), &agents); err != nil || len(agents) != 1 || agents[0].Name != "pg-web-1" || agents[0].RevokedAt != "" {
		t.Fatalf("agents list after the restart: %+v, %v; want pg-web-1, valid", agents, err)
	}
	jar, _ := cookiejar.New(nil)
	app := &approverApp{t: t, base: "http://" + c.http, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	if code, body := app.post("/api/login", map[string]string{"username": "alice", "password": alice.Password}); code != 200 {
		t.Fatalf("alice's login after the restart: %d %s", code, body)
	}
	for _, d := range []string{"gridcity.db", "gridcity.db-wal"} {
		if _, err := os.Stat(filepath.Join(c.data, d)); !os.IsNotExist(err) {
			t.Errorf("%s in --data beside --store: %v; want no SQLite store", d, err)
		}
	}
}
