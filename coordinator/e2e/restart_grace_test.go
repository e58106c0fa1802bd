package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A coordinator killed with -9 and started again a few seconds later, with
// its agents in their backoff: while they return, the servers that were
// connected are "reconnecting", not troubled, and no incident opens for
// them. A server whose agent had stopped before the kill stays troubled and
// keeps the incident it had, with its start.
func TestRestartOpensNoIncidentForReconnectingAgents(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	join := c.joinLine("--reusable")
	for _, name := range []string{"web-1", "web-2"} {
		startAgent(t, c, name, t.TempDir(), join)
	}
	gone := startAgent(t, c, "gone", t.TempDir(), join)
	for _, name := range []string{"web-1", "web-2", "gone"} {
		c.waitStatus(tok, name, "online", 20*time.Second)
	}
	gone.stop()
	c.waitStatus(tok, "gone", "offline", 15*time.Second)
	cs, err := c.mcpClient(tok, "e2e-grace")
	if err != nil {
		t.Fatal(err)
	}
	var goneSince string
	eventually(t, 15*time.Second, "an open incident on gone", func() error {
		var rep graceReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		for _, in := range rep.Recent {
			if in.Target == "gone" && in.EndedAt == "" {
				goneSince = in.StartedAt
				return nil
			}
		}
		return fmt.Errorf("history %+v", rep.Recent)
	})
	cs.Close()
	c.waitFlush() // what -9 leaves is recent

	c.p.signal(syscall.SIGKILL)
	c.p.exited(5 * time.Second)
	time.Sleep(4 * time.Second) // the agents' retries spread into windows of seconds
	c.start()
	restarted := time.Now()

	// Until both are back, neither is a root cause nor has an incident;
	// gone is troubled throughout.
	cs, err = c.mcpClient(tok, "e2e-grace")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sawReconnecting := false
	eventually(t, 70*time.Second, "web-1 and web-2 back", func() error {
		m, err := c.servers(tok)
		if err != nil {
			return err
		}
		var rep graceReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		for _, tr := range rep.Troubled {
			if tr.ID == "web-1" || tr.ID == "web-2" {
				t.Fatalf("%s troubled %s after the restart: %+v", tr.ID, time.Since(restarted).Round(time.Millisecond), tr)
			}
		}
		if g := m["gone"]; g.Status != "offline" {
			t.Fatalf("gone is %s after the restart; want offline: its agent stopped before the kill", g.Status)
		}
		back := 0
		for _, name := range []string{"web-1", "web-2"} {
			switch s := m[name].Status; s {
			case "online":
				back++
			case "reconnecting":
				sawReconnecting = true
			default:
				t.Fatalf("%s is %s after the restart; want reconnecting or online", name, s)
			}
		}
		if back < 2 {
			return fmt.Errorf("%d of 2 back", back)
		}
		return nil
	})
	t.Logf("both back %s after the restart (seen reconnecting: %v)", time.Since(restarted).Round(100*time.Millisecond), sawReconnecting)

	// The tracker observes every 5 s: give it a turn, then read the history.
	time.Sleep(6 * time.Second)
	var rep graceReport
	if err := callTool(cs, "incident_report", nil, &rep); err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, in := range rep.Recent {
		switch {
		case in.Target == "web-1" || in.Target == "web-2":
			t.Errorf("incident on %s after the restart: %+v", in.Target, in)
		case in.Target == "gone" && in.EndedAt == "":
			open++
			if in.StartedAt != goneSince {
				t.Errorf("gone's incident starts at %s after the restart; want %s, from before it", in.StartedAt, goneSince)
			}
		}
	}
	if open != 1 {
		t.Errorf("history %+v; want gone's incident, still open", rep.Recent)
	}
}

type graceReport struct {
	Troubled []struct{ ID, Status, Reason string }
	Recent   []struct{ Target, Reason, StartedAt, EndedAt string }
}
