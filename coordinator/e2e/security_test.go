package e2e

// security_findings on a real test host: a network namespace with its own agent, auth log and
// nftables ruleset. The test writes sshd's lines into the log, blocks the source with a real
// nft rule in the namespace, and runs a second agent as an unprivileged user that cannot read
// the log.

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type attackView struct {
	Kind, Server, Source, State, BlockedBy, Advice, FirstSeen, LastSeen string
	Users                                                               []string
	Count                                                               int
	Blocked                                                             bool
}

type securityFindings struct {
	Attacks   []attackView
	Exposures []struct{ Kind, Server, Detail string }
	Gaps      []struct{ Server, Check, Reason string }
}

func TestSecurityFindingsOnATestHost(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install nftables: nft not found")
		}
		t.Skip("nft not found: apt-get install nftables")
	}
	n := newTestNet(t)
	h := n.host("sec-1")
	dir := t.TempDir()
	authLog := filepath.Join(dir, "auth.log")
	if err := os.WriteFile(authLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	agentCfg := filepath.Join(dir, "agent.yaml")
	os.WriteFile(agentCfg, []byte(fmt.Sprintf("authLogs: [%q]\n", authLog)), 0o600)
	cfgFile := filepath.Join(dir, "gridcity.yaml")
	os.WriteFile(cfgFile, []byte("collect: {fast: 1s, medium: 2s}\n"), 0o600)
	c := startCoordinatorOn(t, n, cfgFile)
	tok := c.token()
	h.startAgent(t, filepath.Join(dir, "state"), agentCfg, c.joinLine())
	c.waitStatus(tok, "sec-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-security")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	// sshd's lines, as rsyslog writes them on Debian 12, appended while the agent follows.
	f, err := os.OpenFile(authLog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Now()
	for i, u := range []string{"admin", "admin", "oracle", "test", "ubuntu", "admin", "root"} {
		ts := now.Add(time.Duration(i-7) * time.Second).Format("2006-01-02T15:04:05.000000-07:00")
		fmt.Fprintf(f, "%s sec-1 sshd[%d]: Failed password for invalid user %s from 203.0.113.7 port %d ssh2\n", ts, 4100+i, u, 50000+i)
	}
	fmt.Fprintf(f, "%s sec-1 sshd[4200]: Accepted publickey for deploy from 10.9.8.7 port 40000 ssh2: ED25519 SHA256:abc\n", now.Format("2006-01-02T15:04:05.000000-07:00"))

	attack := func(rep securityFindings) (int, bool) {
		for i, a := range rep.Attacks {
			if a.Server == "sec-1" && a.Source == "203.0.113.7" && a.Kind == "ssh_brute_force" {
				return i, true
			}
		}
		return 0, false
	}
	var rep securityFindings
	eventually(t, 20*time.Second, "the attack in security_findings", func() error {
		rep = securityFindings{}
		if err := callTool(cs, "security_findings", nil, &rep); err != nil {
			return err
		}
		i, ok := attack(rep)
		if !ok {
			return fmt.Errorf("no attack from 203.0.113.7 on sec-1: %+v", rep.Attacks)
		}
		if a := rep.Attacks[i]; a.Count != 7 {
			return fmt.Errorf("attack %+v; want 7 failures", a)
		}
		return nil
	})
	i, _ := attack(rep)
	a := rep.Attacks[i]
	if a.State != "open" || a.Blocked || !slices.Contains(a.Users, "admin") || a.FirstSeen == "" || !strings.Contains(a.Advice, "203.0.113.7") {
		t.Errorf("attack %+v; want open, not blocked, admin among the users, advice naming the source", a)
	}
	for _, x := range rep.Attacks {
		if x.Source == "10.9.8.7" {
			t.Errorf("a single accepted login is no attack: %+v", x)
		}
	}

	// Block it in the host's own firewall.
	for _, args := range [][]string{
		{"add", "table", "inet", "filter"},
		{"add", "chain", "inet", "filter", "input", "{ type filter hook input priority 0 ; policy accept ; }"},
		{"add", "rule", "inet", "filter", "input", "ip", "saddr", "203.0.113.7", "drop"},
	} {
		if out, err := h.run(t, "nft", args...); err != nil {
			t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	eventually(t, 20*time.Second, "the attack blocked", func() error {
		rep = securityFindings{}
		if err := callTool(cs, "security_findings", nil, &rep); err != nil {
			return err
		}
		i, ok := attack(rep)
		if !ok {
			return fmt.Errorf("the attack is gone: %+v", rep.Attacks)
		}
		if a := rep.Attacks[i]; !a.Blocked || !strings.Contains(a.BlockedBy, "nftables") {
			return fmt.Errorf("attack %+v; want blocked by nftables", a)
		}
		return nil
	})

	// A second agent on the host runs as nobody and cannot read the log: a gap, not silence.
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// Its own directory, which nobody may enter: the binary, its state and its config. The
	// log stays root's, mode 0600.
	home, err := os.MkdirTemp("", "gridcity-e2e-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	agentBin := filepath.Join(home, "gridcity-agent")
	if b, err := os.ReadFile(filepath.Join(bin, "gridcity-agent")); err != nil || os.WriteFile(agentBin, b, 0o755) != nil {
		t.Fatalf("copy the agent binary: %v", err)
	}
	state2 := filepath.Join(home, "state")
	os.Mkdir(state2, 0o700)
	os.Chown(state2, uid, gid)
	cfg2 := filepath.Join(home, "agent.yaml")
	os.WriteFile(cfg2, []byte(fmt.Sprintf("commands: false\nauthLogs: [%q]\n", authLog)), 0o644)
	os.Chmod(dir, 0o755) // the log's directory may be entered; the log itself is root's alone
	join := c.joinLine()
	startCmd(t, "agent sec-2", exec.Command("ip", "netns", "exec", h.ns, "runuser", "-u", "nobody", "--",
		agentBin, "run", "--state", state2, "--name", "sec-2", "--config", cfg2, "--join", join, "--log-level", "debug"))
	c.waitStatus(tok, "sec-2", "online", 20*time.Second)
	eventually(t, 20*time.Second, "a gap for the unreadable log", func() error {
		rep = securityFindings{}
		if err := callTool(cs, "security_findings", nil, &rep); err != nil {
			return err
		}
		for _, g := range rep.Gaps {
			if g.Server == "sec-2" && strings.HasPrefix(g.Check, "logins") && strings.Contains(g.Reason, "permission denied") {
				return nil
			}
		}
		return fmt.Errorf("gaps %+v; want sec-2's log unreadable", rep.Gaps)
	})
	for _, x := range rep.Attacks {
		if x.Server == "sec-2" {
			t.Errorf("sec-2 cannot read the log, yet reports %+v", x)
		}
	}
}
