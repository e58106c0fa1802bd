package collect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sshdLines are OpenSSH 9.2's own lines for two attempts and a login (see
// authlog/testdata), stamped now as rsyslog's RFC 3339 format writes them.
func sshdLines(at time.Time, pid int, msgs ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s web-1 sshd[%d]: %s\n", at.UTC().Format("2006-01-02T15:04:05.000000-07:00"), pid, m)
	}
	return b.String()
}

func appendLog(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

func loginsSet(cfg Config) *Set {
	return testSet(map[string]collector{"logins": newLoginsCollector(cfg, nil)}, TierFast)
}

func TestLogins(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.log")
	now := time.Now()
	appendLog(t, auth, sshdLines(now.Add(-time.Hour), 14403,
		"Invalid user admin from 203.0.113.9 port 54284",
		"pam_unix(sshd:auth): check pass; user unknown",
		"Failed password for invalid user admin from 203.0.113.9 port 54284 ssh2",
		"Failed password for invalid user admin from 203.0.113.9 port 54284 ssh2",
		"Connection closed by invalid user admin 203.0.113.9 port 54284 [preauth]",
		"PAM 1 more authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.9 ",
	)+sshdLines(now.Add(-time.Minute), 15286,
		"Failed password for root from 198.51.100.4 port 42332 ssh2",
		"Accepted publickey for root from 198.51.100.4 port 42332 ssh2: ED25519 SHA256:T9dnjVxiBJVyyCqT1dXmgIqFujvMA+jOJRmxwB5pMJs",
	))
	s := loginsSet(Config{AuthLogs: []string{auth, filepath.Join(dir, "secure")}, StateDir: t.TempDir(), RootFS: dir})
	ctx := context.Background()
	first := s.Collect(ctx, TierFast)
	if g := gapText(first); g != "" {
		t.Fatalf("got gaps %s", g)
	}
	l := first.GetLogins()
	if len(l.GetLogSources()) != 1 || l.LogSources[0] != auth || len(l.GetSources()) != 2 {
		t.Fatalf("got %v", l)
	}
	attacker, admin := l.Sources[0], l.Sources[1]
	if attacker.Address != "203.0.113.9" || attacker.Failures != 2 || attacker.InvalidUsers != 2 || strings.Join(attacker.Users, ",") != "admin" || attacker.Successes != 0 {
		t.Errorf("got %v; want 203.0.113.9 with 2 failures for the invalid user admin", attacker)
	}
	if admin.Address != "198.51.100.4" || admin.Failures != 1 || admin.Successes != 1 || admin.LastSuccessUser != "root" || admin.FailuresBeforeSuccess != 1 {
		t.Errorf("got %v; want 198.51.100.4 with a failure then root's login", admin)
	}

	// Nothing new: the same section, so nothing to send.
	second := s.Collect(ctx, TierFast)
	if c := Changes(first, second); c != nil {
		t.Errorf("an unchanged log produced changes: %v", c)
	}
	// A new attempt reaches the next update.
	appendLog(t, auth, sshdLines(time.Now(), 16000, "Failed password for root from 203.0.113.9 port 1 ssh2"))
	third := s.Collect(ctx, TierFast)
	c := Changes(second, third)
	if got := c.GetLogins().GetSources(); len(got) == 0 || got[0].Failures != 3 {
		t.Errorf("got changes %v; want 203.0.113.9 at 3 failures", c)
	}
}

func TestLoginsGaps(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	// No log and no journal: the collector's gap, no section.
	s := loginsSet(Config{AuthLogs: []string{filepath.Join(dir, "auth.log")}, RootFS: dir})
	u := s.Collect(ctx, TierFast)
	want := "logins: no SSH log: " + filepath.Join(dir, "auth.log") + " does not exist and there is no journal (no journal files in " +
		filepath.Join(dir, "run/log/journal") + ", " + filepath.Join(dir, "var/log/journal") + ")"
	if u.Logins != nil || gapText(u) != want {
		t.Errorf("got section %v, gaps %q; want no section and %q", u.Logins, gapText(u), want)
	}

	// One log that cannot be read beside one that can: a partial gap.
	auth, notFile := filepath.Join(dir, "auth.log"), filepath.Join(dir, "secure")
	appendLog(t, auth, sshdLines(time.Now(), 1, "Failed password for root from 203.0.113.9 port 1 ssh2"))
	if err := os.Mkdir(notFile, 0o755); err != nil {
		t.Fatal(err)
	}
	s = loginsSet(Config{AuthLogs: []string{auth, notFile}, RootFS: dir})
	u = s.Collect(ctx, TierFast)
	want = "logins:" + notFile + ": cannot read " + notFile + ": not a regular file"
	if len(u.GetLogins().GetSources()) != 1 || gapText(u) != want {
		t.Errorf("got %v, gaps %q; want the readable log and %q", u.GetLogins(), gapText(u), want)
	}
}

// TestLoginsRegistered checks the collector runs with the fast tier, so
// that an attack reaches the coordinator within seconds.
func TestLoginsRegistered(t *testing.T) {
	for _, r := range registry {
		if r.name == "logins" {
			if r.tier != TierFast {
				t.Errorf("logins runs with tier %v; want fast", r.tier)
			}
			return
		}
	}
	t.Error("no logins collector registered")
}
