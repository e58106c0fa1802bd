package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestAgentFailsOverToAnotherReplica runs two `gridcity serve` replicas on
// one PostgreSQL, each with its own addresses and --data, and a real agent
// enrolled through A: the agent learns B's address from A and keeps it in
// its state directory; when A is killed (-9, no goodbye) the agent
// reconnects to B within its backoff, verified against the same CA, and
// its stream is on B. Before that, while A holds the stream, B's
// list_servers already shows the agent online with its disks: the fleet
// view is shared through the store (stream leases and saved state).
func TestAgentFailsOverToAnotherReplica(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	a := startReplica(t, url)
	b := startReplica(t, url)
	tokenOf := (*coordinator).token
	state := t.TempDir()
	startAgent(t, a, "ha-web-1", state, a.joinLine("--store", url))
	onA := a.waitStatus(tokenOf(a), "ha-web-1", "online", 30*time.Second)
	seenOnA := time.Now()
	if len(onA.Disks) == 0 {
		t.Fatalf("ha-web-1 on A lists no disks: %+v", onA)
	}
	onB := b.waitStatus(tokenOf(b), "ha-web-1", "online", 15*time.Second)
	t.Logf("shared view: replica B listed the agent online %s after replica A did", time.Since(seenOnA).Round(time.Millisecond))
	if len(onB.Disks) != len(onA.Disks) || onB.OS.Hostname != onA.OS.Hostname {
		t.Fatalf("ha-web-1 on B: %d disks, host %q; want A's view: %d disks, host %q", len(onB.Disks), onB.OS.Hostname, len(onA.Disks), onA.OS.Hostname)
	}
	if n := connected(t, b); n != 0 {
		t.Fatalf("replica B holds %d agent streams while the agent is on A; want 0", n)
	}

	// A tells its agents of B at its next heartbeat (every 5 s).
	waitKnowsReplicas(t, state, a, b)
	if fi, err := os.Stat(filepath.Join(state, "coordinators.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("coordinators.json: %v, %v; want mode 0600", fi, err)
	}

	killed := time.Now()
	a.p.cmd.Process.Kill()
	if !a.p.exited(10 * time.Second) {
		t.Fatal("replica A did not die on SIGKILL")
	}
	eventually(t, 30*time.Second, "the agent's stream on replica B", func() error {
		if n := connected(t, b); n != 1 {
			return fmt.Errorf("replica B holds %d agent streams; want 1", n)
		}
		return nil
	})
	t.Logf("failover: the agent's stream was on replica B %s after replica A was killed", time.Since(killed).Round(time.Millisecond))
	b.waitStatus(tokenOf(b), "ha-web-1", "online", 5*time.Second)
}

// startReplica starts a `gridcity serve` on the PostgreSQL store at url,
// with its own addresses and --data, the store's unseal key, and the
// extra flags given.
func startReplica(t *testing.T, url string, extra ...string) *coordinator {
	t.Helper()
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t), storeURL: url}
	c.p = start(t, "coordinator "+c.grpc, append([]string{"gridcity", "serve", "--data", c.data, "--store", url, "--unseal-key-file", unsealKeyFor(t, url),
		"--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc, "--log-level", "debug"}, extra...)...)
	c.waitHealthy()
	return c
}

// unsealKeys holds the unseal key file of each PostgreSQL store the tests
// started replicas on, by its URL: every replica of a store is given the
// same, as an operator gives it to every host.
var unsealKeys sync.Map

// unsealKeyFor is the unseal key file of the store at url, made (mode
// 0600, as openssl rand -hex 32 would) the first time, removed when the
// test that made it ends.
func unsealKeyFor(t *testing.T, url string) string {
	t.Helper()
	if path, ok := unsealKeys.Load(url); ok {
		return path.(string)
	}
	key := make([]byte, 32)
	rand.Read(key)
	path := filepath.Join(t.TempDir(), "unseal.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, loaded := unsealKeys.LoadOrStore(url, path); loaded {
		return got.(string)
	}
	t.Cleanup(func() { unsealKeys.Delete(url) })
	return path
}

// waitKnowsReplicas waits until the agent with that state directory keeps
// the addresses of every one of the replicas (its holder tells it at its
// next heartbeat, every 5 s).
func waitKnowsReplicas(t *testing.T, state string, cs ...*coordinator) {
	t.Helper()
	eventually(t, 20*time.Second, "the agent keeps every replica's address", func() error {
		raw, err := os.ReadFile(filepath.Join(state, "coordinators.json"))
		if err != nil {
			return err
		}
		var kept struct{ GRPCAddresses []string }
		if err := json.Unmarshal(raw, &kept); err != nil {
			return err
		}
		for _, c := range cs {
			if !slices.Contains(kept.GRPCAddresses, c.grpc) {
				return fmt.Errorf("coordinators.json lists %v; want %s among them", kept.GRPCAddresses, c.grpc)
			}
		}
		return nil
	})
}

// connected is how many agent streams the coordinator holds (its /healthz).
func connected(t *testing.T, c *coordinator) int {
	t.Helper()
	return health(t, c).AgentsConnected
}
