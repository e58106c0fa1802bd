package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestOneJudgementAcrossReplicas: three replicas on one PostgreSQL, with a
// TCP service as a resource that web-1 uses, and web-1's agent connected
// to a replica that does not lead. The leader judges the service from
// that agent's checks (no coordinator probes it); the service stops and
// every replica's incident_report names it the root cause, with the same
// start; the leader is killed -9 and another replica leads within
// seconds; the service comes back and the new leader ends the incident.
// One incident was recorded, opened once and ended once.
func TestOneJudgementAcrossReplicas(t *testing.T) {
	t.Parallel()
	svc := startTCPService(t, "127.0.0.1:0")
	cfg := filepath.Join(t.TempDir(), "gridcity.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`resources:
  - {id: queue, kind: probe, engine: tcp, target: "%s"}
links:
  - {from: web-1, to: queue}
probes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 2}
`, svc.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	url := pgtest.Database(t)
	replicas := []*coordinator{startReplica(t, url, "--config", cfg), startReplica(t, url, "--config", cfg), startReplica(t, url, "--config", cfg)}
	leader := waitLeader(t, replicas)
	var follower *coordinator
	for _, c := range replicas {
		if c != leader {
			follower = c
			break
		}
	}
	startAgent(t, follower, "web-1", t.TempDir(), follower.joinLine("--store", url))
	follower.waitStatus(follower.token(), "web-1", "online", 30*time.Second)
	sessions := map[*coordinator]*mcp.ClientSession{}
	for _, c := range replicas {
		sessions[c] = session(t, c, c.token())
	}

	// Every replica judges the service from the follower's agent alone.
	for _, c := range replicas {
		eventually(t, 30*time.Second, "queue checked from web-1 on replica "+c.grpc, func() error {
			var rs resourceList
			if err := callTool(sessions[c], "list_resources", nil, &rs); err != nil {
				return err
			}
			if r := rs.get("queue"); r.Status != "ok" || r.CheckedFrom != "web-1" {
				return fmt.Errorf("queue %+v; want ok, checked from web-1", r)
			}
			return nil
		})
	}

	// The service stops: one incident, the same on every replica.
	svc.stop()
	stopped := time.Now()
	eventually(t, 45*time.Second, "every replica names queue the root cause, with one start", func() error {
		since := ""
		for _, c := range replicas {
			rc, err := rootCause(sessions[c], "queue")
			if err != nil {
				return fmt.Errorf("replica %s: %w", c.grpc, err)
			}
			if since != "" && rc != since {
				return fmt.Errorf("replica %s says queue is troubled since %s; another says %s", c.grpc, rc, since)
			}
			since = rc
		}
		return nil
	})
	t.Logf("the incident was on every replica %s after the service stopped", time.Since(stopped).Round(time.Millisecond))

	// diagnose on a replica that does not hold web-1's stream still asks
	// web-1's agent: through the store, of the replica that holds it.
	for _, c := range replicas {
		if c == follower {
			continue
		}
		eventually(t, 20*time.Second, "diagnose queue on replica "+c.grpc+" asks web-1's agent", func() error {
			rep, raw, err := diagnose(sessions[c], "queue")
			if err != nil {
				return err
			}
			for _, a := range rep.Attempts {
				if a.From == "web-1" && a.Answered && !a.OK && strings.Contains(a.Reason, "refused") {
					return nil
				}
			}
			return fmt.Errorf("no refused attempt from web-1's agent in:\n%s", raw)
		})
	}

	// The leader dies; a survivor leads.
	killed := time.Now()
	leader.p.cmd.Process.Kill()
	if !leader.p.exited(10 * time.Second) {
		t.Fatal("the leader did not die on SIGKILL")
	}
	var survivors []*coordinator
	for _, c := range replicas {
		if c != leader {
			survivors = append(survivors, c)
		}
	}
	waitLeader(t, survivors)
	t.Logf("the lead moved %s after the leader was killed", time.Since(killed).Round(time.Millisecond))

	// The service is back: the new leader ends the incident; every survivor says so.
	svc = startTCPService(t, svc.addr)
	for _, c := range survivors {
		eventually(t, 45*time.Second, "queue healthy again on replica "+c.grpc, func() error {
			if rc, err := rootCause(sessions[c], "queue"); err == nil {
				return fmt.Errorf("queue still a root cause since %s", rc)
			}
			return nil
		})
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The report follows the checks; the leader records the end at its next observation.
	eventually(t, 10*time.Second, "the incident on queue recorded once, and ended", func() error {
		var opened, ended int
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE ended_at <> 0) FROM incidents WHERE target = 'queue'`).Scan(&opened, &ended); err != nil {
			return err
		}
		if opened != 1 || ended != 1 {
			return fmt.Errorf("incidents on queue: %d opened, %d ended; want one, opened and ended once across the replicas", opened, ended)
		}
		return nil
	})
}

// waitLeader waits until exactly one of the replicas says it leads, and
// returns it.
func waitLeader(t *testing.T, cs []*coordinator) *coordinator {
	t.Helper()
	var leader *coordinator
	eventually(t, 20*time.Second, "one replica leads", func() error {
		leader = nil
		n := 0
		for _, c := range cs {
			if health(t, c).Leader {
				leader, n = c, n+1
			}
		}
		if n != 1 {
			return fmt.Errorf("%d of %d replicas lead; want one", n, len(cs))
		}
		return nil
	})
	return leader
}

// rootCause is when incident_report says the target has been a root cause
// since; an error when it is not one.
func rootCause(cs *mcp.ClientSession, target string) (string, error) {
	var rep incidentReport
	if err := callTool(cs, "incident_report", nil, &rep); err != nil {
		return "", err
	}
	for _, rc := range rep.RootCauses {
		if rc.ID == target {
			return rc.Since, nil
		}
	}
	return "", fmt.Errorf("root causes %+v; want %s among them", rep.RootCauses, target)
}

// tcpService accepts connections and closes them, as a service a probe
// reaches; stop closes its listener, so that probes are refused.
type tcpService struct {
	addr string
	ln   net.Listener
}

func startTCPService(t *testing.T, addr string) *tcpService {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := &tcpService{addr: ln.Addr().String(), ln: ln}
	t.Cleanup(s.stop)
	return s
}

func (s *tcpService) stop() { s.ln.Close() }
