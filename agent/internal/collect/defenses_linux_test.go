package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/agent/internal/defense"
	"github.com/gridcity/gridcity/agent/internal/hostquery"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

const defensesFixture = "testdata/defenses/etc/ssh/sshd_config"

// fixtureFirewall replays a host with nftables and fail2ban's nftables
// action from testdata/defenses; the other tools are not installed.
func fixtureFirewall(_ context.Context, maxBytes int, tool string, args ...string) ([]byte, error) {
	files := map[string]string{
		"nft -j list ruleset":    "testdata/defenses/nft.json",
		"fail2ban-client banned": "testdata/defenses/fail2ban-banned.txt",
	}
	f, ok := files[strings.Join(append([]string{tool}, args...), " ")]
	if !ok {
		return nil, fmt.Errorf("%s: %w", tool, defense.ErrNotInstalled)
	}
	b, err := os.ReadFile(f)
	if len(b) > maxBytes {
		return b[:maxBytes], hostquery.ErrOutputTruncated
	}
	return b, err
}

// useFixtureFirewall makes the defenses collector of s replay
// fixtureFirewall instead of running the host's tools.
func useFixtureFirewall(s *Set) {
	for _, e := range s.entries {
		if d, ok := e.c.(*defensesCollector); ok {
			d.run = fixtureFirewall
		}
	}
}

func defensesSet(cfg Config) *Set {
	s := testSet(map[string]collector{"defenses": newDefensesCollector(cfg.withDefaults(), nil)}, TierMedium)
	useFixtureFirewall(s)
	return s
}

// TestDefenses collects the fixture and compares the section and its gaps
// with testdata/defenses/defenses.json (go test -update rewrites it).
func TestDefenses(t *testing.T) {
	u := defensesSet(Config{SSHDConfig: defensesFixture}).Collect(context.Background(), TierMedium)
	got := &gridcityv1.StateUpdate{Defenses: u.Defenses, Gaps: u.Gaps}

	const golden = "testdata/defenses/defenses.json"
	if *update {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := &gridcityv1.StateUpdate{}
	if err := protojson.Unmarshal(mustReadBytes(t, golden), want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		gb, _ := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got)
		t.Errorf("got\n%s\nwant the contents of %s (run go test -update after a deliberate change)", gb, golden)
	}

	// The points of the fixture, spelled out.
	sshd := u.GetDefenses().GetSshd()
	if sshd.GetPasswordAuthentication() != "yes" || sshd.GetPasswordAuthenticationFrom() != "testdata/defenses/etc/ssh/sshd_config.d/50-cloud-init.conf:1" {
		t.Errorf("got PasswordAuthentication %q from %q; want yes from cloud-init's drop-in", sshd.GetPasswordAuthentication(), sshd.GetPasswordAuthenticationFrom())
	}
	fw := u.GetDefenses().GetFirewall()
	if strings.Join(fw.GetTools(), " ") != "fail2ban nftables" || len(fw.GetBlocks()) != 17 || gapText(u) != "" {
		t.Errorf("got tools %q, %d blocks, gaps %q; want fail2ban nftables, 17 blocks, no gaps", fw.GetTools(), len(fw.GetBlocks()), gapText(u))
	}
}

func mustReadBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDefensesGaps(t *testing.T) {
	s := testSet(map[string]collector{"defenses": &defensesCollector{
		fsys:       os.DirFS("."),
		sshdConfig: "testdata/defenses/no-sshd_config",
		run: func(_ context.Context, _ int, tool string, _ ...string) ([]byte, error) {
			return nil, fmt.Errorf("%s: %w", tool, defense.ErrNotInstalled)
		},
	}}, TierMedium)
	u := s.Collect(context.Background(), TierMedium)
	want := "defenses:firewall: no firewall tool could be read: nft, iptables-save and fail2ban-client are missing or not permitted (iptables-save: not installed; ip6tables-save: not installed; nft: not installed; fail2ban-client: not installed)\n" +
		"defenses:sshd: testdata/defenses/no-sshd_config not found: is the OpenSSH server installed?"
	if gapText(u) != want {
		t.Errorf("got gaps\n%s\nwant\n%s", gapText(u), want)
	}
	// The section still travels: it says nothing is known.
	if u.Defenses == nil || u.Defenses.Sshd != nil || u.Defenses.Firewall != nil {
		t.Errorf("got section %v; want an empty one", u.Defenses)
	}
}

func TestDefensesCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &defensesCollector{fsys: os.DirFS("."), sshdConfig: defensesFixture, run: func(ctx context.Context, _ int, tool string, _ ...string) ([]byte, error) {
		cancel()
		return nil, fmt.Errorf("%s: %w", tool, ctx.Err())
	}}
	var out gridcityv1.StateUpdate
	if err := c.update(ctx, &out, &notes{name: "defenses"}); !errors.Is(err, context.Canceled) || out.Defenses != nil {
		t.Errorf("got %v, section %v; want context.Canceled and no section", err, out.Defenses)
	}
}

func TestHostTool(t *testing.T) {
	ctx := context.Background()
	c := &defensesCollector{fsys: fstest.MapFS{}, find: findTool}
	hostTool := c.hostTool
	if _, err := hostTool(ctx, 1<<10, "gridcity-no-such-tool"); !errors.Is(err, defense.ErrNotInstalled) || err.Error() != "gridcity-no-such-tool: not installed" {
		t.Errorf("missing tool: got %v; want gridcity-no-such-tool: not installed", err)
	}
	// The tools run by absolute path with hostquery.Query's bounds.
	out, err := hostTool(ctx, 5, "echo", "hello world")
	if string(out) != "hello" || !errors.Is(err, hostquery.ErrOutputTruncated) {
		t.Errorf("echo: got %q, %v; want the first 5 bytes and ErrOutputTruncated", out, err)
	}
	var exitErr *hostquery.ExitError
	if _, err := hostTool(ctx, 1<<10, "false"); !errors.As(err, &exitErr) || !strings.HasSuffix(exitErr.Argv0, "/false") {
		t.Errorf("false: got %v; want an ExitError naming its path", err)
	}
}

// fail2ban-client is not started while fail2ban's socket is missing, and is
// once it is there; a host without fail2ban-client still says "not
// installed".
func TestHostToolSkipsAStoppedFail2ban(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{}
	installed := true
	// fail2ban-client stands for itself with echo, which shows it ran.
	c := &defensesCollector{fsys: fsys, find: func(tool string) (string, bool) {
		if tool == "fail2ban-client" {
			p, _ := findTool("echo")
			return p, installed
		}
		return findTool(tool)
	}}
	out, err := c.hostTool(ctx, 1<<10, "fail2ban-client", "banned")
	if !errors.Is(err, defense.ErrFail2banStopped) || out != nil || !strings.Contains(err.Error(), defense.DefaultFail2banSocket+" does not exist") {
		t.Errorf("without its socket: got %q, %v; want ErrFail2banStopped naming the socket, and nothing run", out, err)
	}
	fsys["var/run/fail2ban/fail2ban.sock"] = &fstest.MapFile{Mode: fs.ModeSocket | 0o600}
	if out, err := c.hostTool(ctx, 1<<10, "fail2ban-client", "banned"); err != nil || string(out) != "banned\n" {
		t.Errorf("with its socket: got %q, %v; want it run", out, err)
	}
	installed = false
	if _, err := c.hostTool(ctx, 1<<10, "fail2ban-client", "banned"); !errors.Is(err, defense.ErrNotInstalled) {
		t.Errorf("not installed: got %v; want ErrNotInstalled", err)
	}

	// Through the collector, a stopped fail2ban is a gap that says so.
	cfg := Config{SSHDConfig: defensesFixture}.withDefaults()
	d := newDefensesCollector(cfg, nil).(*defensesCollector)
	d.fsys, d.find = fstest.MapFS{}, c.find
	installed = true
	var u gridcityv1.StateUpdate
	n := &notes{name: "defenses"}
	if err := d.update(ctx, &u, n); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(n.gaps); !strings.Contains(got, "fail2ban is not running: its socket "+defense.DefaultFail2banSocket+" does not exist") {
		t.Errorf("gaps %s; want one saying fail2ban is not running", got)
	}
}
