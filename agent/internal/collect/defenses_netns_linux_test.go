package collect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/agent/internal/defense"
	"github.com/gridcity/gridcity/agent/internal/hostquery"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TestDefensesFirewallInNetns loads a real nftables ruleset into a network
// namespace of its own (never the host's firewall) and collects it with the
// defenses collector, whose tools run in that namespace through
// `ip netns exec`. It needs root and nft; in CI (CI=true, as root) it must
// run, and CI installs nftables for it.
func TestDefensesFirewallInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	ipPath, okIP := findTool("ip")
	_, okNft := findTool("nft")
	if !okIP || !okNft {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ip (found: %v) and nft (found: %v) are needed: CI must install the Debian packages iproute2 and nftables", okIP, okNft)
		}
		t.Skip("needs ip (iproute2) and nft (nftables)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ns := fmt.Sprintf("gc-def-test-%d", os.Getpid())
	if _, _, err := hostquery.Query(ctx, 1<<16, ipPath, "netns", "add", ns); err != nil {
		t.Fatalf("ip netns add %s: %v", ns, err)
	}
	t.Cleanup(func() {
		// A fresh context: the test's may be done when it failed.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, _, err := hostquery.Query(ctx, 1<<16, ipPath, "netns", "delete", ns); err != nil {
			t.Errorf("ip netns delete %s: %v", ns, err)
		}
	})

	// inNetns runs a tool found as the collector finds it, inside ns.
	inNetns := func(ctx context.Context, maxBytes int, tool string, args ...string) ([]byte, error) {
		path, ok := findTool(tool)
		if !ok {
			return nil, fmt.Errorf("%s: %w", tool, defense.ErrNotInstalled)
		}
		out, _, err := hostquery.Query(ctx, maxBytes, append([]string{ipPath, "netns", "exec", ns, path}, args...)...)
		return out, err
	}

	ruleset := filepath.Join(t.TempDir(), "ruleset.nft")
	const rules = `table inet gridcity_test {
	set blocklist {
		type ipv4_addr
		flags interval
		elements = { 198.51.100.0/24 }
	}
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr 203.0.113.7 drop
		ip saddr @blocklist counter drop
	}
}
`
	if err := os.WriteFile(ruleset, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := inNetns(ctx, 1<<16, "nft", "-f", ruleset); err != nil {
		t.Fatalf("nft -f: %v", err)
	}

	c := newDefensesCollector(Config{SSHDConfig: defensesFixture}.withDefaults(), nil).(*defensesCollector)
	c.run = inNetns
	var out gridcityv1.StateUpdate
	n := &notes{name: "defenses"}
	if err := c.update(ctx, &out, n); err != nil {
		t.Fatal(err)
	}
	fw := out.GetDefenses().GetFirewall()
	var blocks []string
	for _, b := range fw.GetBlocks() {
		blocks = append(blocks, b.GetNetwork()+" by "+b.GetBy())
	}
	for _, want := range []string{"203.0.113.7/32 by nftables inet gridcity_test input", "198.51.100.0/24 by nftables inet gridcity_test input"} {
		if !slices.Contains(blocks, want) {
			t.Errorf("got blocks %q; want %q among them", blocks, want)
		}
	}
	if !slices.Contains(fw.GetTools(), "nftables") {
		t.Errorf("got tools %q; want nftables among them (gaps: %v)", fw.GetTools(), n.gaps)
	}
	// The namespace holds nothing else that nftables would report.
	for _, b := range blocks {
		if strings.HasPrefix(strings.SplitN(b, " by ", 2)[1], "nftables ") && !strings.Contains(b, "gridcity_test") {
			t.Errorf("unexpected block %q", b)
		}
	}
}
