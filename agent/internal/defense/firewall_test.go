package defense

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/agent/internal/hostquery"
)

// replay is a Runner that answers from captured output, by the command
// line ("nft -j list ruleset"). A command it does not know is not
// installed.
type replay struct {
	mu   sync.Mutex
	out  map[string]string
	errs map[string]error
	ran  []string
}

func (r *replay) run(ctx context.Context, maxBytes int, tool string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{tool}, args...), " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran = append(r.ran, cmd)
	if _, ok := ctx.Deadline(); !ok {
		return nil, fmt.Errorf("%s: run without a timeout", cmd)
	}
	if err, ok := r.errs[cmd]; ok {
		return nil, err
	}
	out, ok := r.out[cmd]
	if !ok {
		return nil, fmt.Errorf("%s: %w", tool, ErrNotInstalled)
	}
	if len(out) > maxBytes {
		return []byte(out[:maxBytes]), fmt.Errorf("%s: %w", tool, hostquery.ErrOutputTruncated)
	}
	return []byte(out), nil
}

func notes(ns []Note) string {
	var b strings.Builder
	for _, n := range ns {
		fmt.Fprintf(&b, "%s: %s\n", n.Part, n.Reason)
	}
	return b.String()
}

func fwText(t *testing.T, run Runner) (tools, blocks, noteText string, err error) {
	t.Helper()
	fw, ns, err := ReadFirewall(context.Background(), run)
	var b strings.Builder
	for _, x := range fw.GetBlocks() {
		fmt.Fprintf(&b, "%s by %s\n", x.GetNetwork(), x.GetBy())
	}
	return strings.Join(fw.GetTools(), " "), b.String(), notes(ns), err
}

func TestReadFirewall(t *testing.T) {
	iptablesHost := func() *replay {
		return &replay{out: map[string]string{
			"iptables-save":               string(mustRead(t, "testdata/iptables-host/iptables-save.txt")),
			"ip6tables-save":              string(mustRead(t, "testdata/iptables-host/ip6tables-save.txt")),
			"nft -j list ruleset":         string(mustRead(t, "testdata/iptables-host/nft.json")),
			"ipset save":                  string(mustRead(t, "testdata/iptables-host/ipset-save.txt")),
			"fail2ban-client banned":      string(mustRead(t, "testdata/iptables-host/fail2ban-banned.txt")),
			"fail2ban-client status":      string(mustRead(t, "testdata/iptables-host/fail2ban-status.txt")),
			"fail2ban-client status sshd": string(mustRead(t, "testdata/iptables-host/fail2ban-status-sshd.txt")),
		}}
	}
	// iptables-nft's tables are read once, from iptables-save: the
	// chains' own names, the ipsets' members, fail2ban's own list.
	const iptablesHostBlocks = `100.64.0.1/32 by iptables INPUT
192.0.2.10/32 by fail2ban jail sshd
192.0.2.11/32 by fail2ban jail sshd
192.0.2.64/28 by iptables INPUT
192.0.2.128/25 by iptables INPUT
198.51.100.0/24 by iptables INPUT
198.51.100.200/32 by fail2ban jail recidive
203.0.113.7/32 by iptables INPUT
2001:db8::bad/128 by ip6tables INPUT
2001:db8:1::/48 by ip6tables INPUT
2001:db8:beef::7/128 by fail2ban jail recidive
2001:db8:dead::1/128 by fail2ban jail sshd
`

	t.Run("iptables host with fail2ban", func(t *testing.T) {
		tools, blocks, ns, err := fwText(t, iptablesHost().run)
		if tools != "fail2ban ip6tables iptables nftables" || blocks != iptablesHostBlocks || ns != "" || err != nil {
			t.Errorf("got tools %q, blocks\n%s, notes %q, error %v; want all four, blocks\n%s", tools, blocks, ns, err, iptablesHostBlocks)
		}
	})

	t.Run("nftables host with fail2ban", func(t *testing.T) {
		r := &replay{out: map[string]string{
			// iptables-nft with no tables prints nothing.
			"iptables-save":          "",
			"ip6tables-save":         "",
			"nft -j list ruleset":    string(mustRead(t, "testdata/nftables-host/nft.json")),
			"fail2ban-client banned": string(mustRead(t, "testdata/nftables-host/fail2ban-banned.txt")),
		}}
		tools, blocks, ns, err := fwText(t, r.run)
		want := `100.64.0.1/32 by nftables inet filter input
192.0.2.5/32 by nftables inet filter input
192.0.2.10/32 by fail2ban jail sshd
192.0.2.11/32 by fail2ban jail sshd
192.0.2.64/28 by nftables inet filter input
192.0.2.128/25 by nftables inet filter input
198.18.0.0/15 by nftables inet filter input
198.51.100.0/24 by nftables inet filter input
198.51.100.200/32 by fail2ban jail recidive
203.0.113.7/32 by nftables inet filter input
203.0.113.10/31 by nftables inet filter input
203.0.113.12/30 by nftables inet filter input
203.0.113.16/30 by nftables inet filter input
203.0.113.20/32 by nftables inet filter input
2001:db8::bad/128 by nftables inet filter input
2001:db8:1::/48 by nftables inet filter input
2001:db8:dead::1/128 by fail2ban jail sshd
`
		if tools != "fail2ban ip6tables iptables nftables" || blocks != want || ns != "" || err != nil {
			t.Errorf("got tools %q, blocks\n%s, notes %q, error %v; want blocks\n%s", tools, blocks, ns, err, want)
		}
		if strings.Contains(strings.Join(r.ran, "\n"), "ipset") {
			t.Errorf("ran ipset with no rule using a set: %q", r.ran)
		}
	})

	t.Run("fail2ban before banned", func(t *testing.T) {
		r := &replay{
			out: map[string]string{
				"fail2ban-client status":          string(mustRead(t, "testdata/iptables-host/fail2ban-status.txt")),
				"fail2ban-client status sshd":     string(mustRead(t, "testdata/iptables-host/fail2ban-status-sshd.txt")),
				"fail2ban-client status recidive": string(mustRead(t, "testdata/iptables-host/fail2ban-status-recidive.txt")),
			},
			errs: map[string]error{
				"fail2ban-client banned": &hostquery.ExitError{Argv0: "/usr/bin/fail2ban-client", Code: 255, Stderr: "ERROR  Invalid command 'banned'"},
			},
		}
		tools, blocks, ns, err := fwText(t, r.run)
		want := `192.0.2.10/32 by fail2ban jail sshd
192.0.2.11/32 by fail2ban jail sshd
198.51.100.200/32 by fail2ban jail recidive
2001:db8:beef::7/128 by fail2ban jail recidive
2001:db8:dead::1/128 by fail2ban jail sshd
`
		if tools != "fail2ban" || blocks != want || ns != "" || err != nil {
			t.Errorf("got tools %q, blocks\n%s, notes %q, error %v; want fail2ban, blocks\n%s", tools, blocks, ns, err, want)
		}
	})

	t.Run("nothing installed", func(t *testing.T) {
		r := &replay{}
		_, _, _, err := fwText(t, r.run)
		want := "no firewall tool could be read: nft, iptables-save and fail2ban-client are missing or not permitted (iptables-save: not installed; ip6tables-save: not installed; nft: not installed; fail2ban-client: not installed)"
		if err == nil || err.Error() != want {
			t.Errorf("got error %v; want %s", err, want)
		}
	})

	// As each tool fails for a user that is not root (real messages).
	notRoot := map[string]error{
		"iptables-save":          &hostquery.ExitError{Argv0: "/usr/sbin/iptables-save", Code: 4, Stderr: "iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"},
		"ip6tables-save":         &hostquery.ExitError{Argv0: "/usr/sbin/ip6tables-save", Code: 4, Stderr: "ip6tables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"},
		"nft -j list ruleset":    &hostquery.ExitError{Argv0: "/usr/sbin/nft", Code: 1, Stderr: "Operation not permitted (you must be root)"},
		"fail2ban-client banned": &hostquery.ExitError{Argv0: "/usr/bin/fail2ban-client", Code: 255, Stderr: "2026-12-02 17:50:44,385 fail2ban                [13065]: ERROR   Failed to access socket path: /var/run/fail2ban/fail2ban.sock. Is fail2ban running?"},
		"fail2ban-client status": &hostquery.ExitError{Argv0: "/usr/bin/fail2ban-client", Code: 255, Stderr: "2026-12-02 17:50:44,497 fail2ban                [13067]: ERROR   Failed to access socket path: /var/run/fail2ban/fail2ban.sock. Is fail2ban running?"},
	}

	t.Run("not permitted", func(t *testing.T) {
		_, _, _, err := fwText(t, (&replay{errs: notRoot}).run)
		want := "no firewall tool could be read: nft, iptables-save and fail2ban-client are missing or not permitted (" +
			"/usr/sbin/iptables-save exited with code 4: iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root); " +
			"/usr/sbin/ip6tables-save exited with code 4: ip6tables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root); " +
			"/usr/sbin/nft exited with code 1: Operation not permitted (you must be root); " +
			"fail2ban-client: Failed to access socket path: /var/run/fail2ban/fail2ban.sock. Is fail2ban running?)"
		if err == nil || err.Error() != want {
			t.Errorf("got error\n%v\nwant\n%s", err, want)
		}
	})

	t.Run("some tools fail", func(t *testing.T) {
		r := iptablesHost()
		r.errs = map[string]error{
			"nft -j list ruleset":    notRoot["nft -j list ruleset"],
			"fail2ban-client banned": notRoot["fail2ban-client banned"],
			"fail2ban-client status": notRoot["fail2ban-client status"],
			"ipset save":             &hostquery.ExitError{Argv0: "/usr/sbin/ipset", Code: 1, Stderr: "ipset v7.17: Kernel error received: Operation not permitted"},
		}
		tools, blocks, ns, err := fwText(t, r.run)
		wantNotes := `nftables: /usr/sbin/nft exited with code 1: Operation not permitted (you must be root)
ipset: iptables rules drop by ipset, whose members could not be read: /usr/sbin/ipset exited with code 1: ipset v7.17: Kernel error received: Operation not permitted
fail2ban: fail2ban-client: Failed to access socket path: /var/run/fail2ban/fail2ban.sock. Is fail2ban running?
`
		if tools != "ip6tables iptables" || ns != wantNotes || err != nil || !strings.Contains(blocks, "203.0.113.7/32 by iptables INPUT") {
			t.Errorf("got tools %q, notes\n%s, error %v, blocks\n%s; want iptables and ip6tables, notes\n%s", tools, ns, err, blocks, wantNotes)
		}
	})

	t.Run("cut and capped", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("# Generated by iptables-save v1.8.9 (nf_tables)\n*filter\n")
		for i := range MaxBlocks + 50 {
			fmt.Fprintf(&b, "-A f2b-sshd -s 10.0.%d.%d/32 -j REJECT --reject-with icmp-port-unreachable\n", i>>8, i&255)
		}
		for b.Len() < maxIptablesOutput+100 {
			b.WriteString("-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT\n")
		}
		r := &replay{out: map[string]string{"iptables-save": b.String()}}
		tools, blocks, ns, err := fwText(t, r.run)
		wantNotes := "iptables: iptables-save printed more than 16 MiB; read up to there\nfirewall: 50 more blocked networks not listed (at most 4096 are)\n"
		if tools != "iptables" || strings.Count(blocks, "\n") != MaxBlocks || ns != wantNotes || err != nil {
			t.Errorf("got tools %q, %d blocks, notes\n%s, error %v; want iptables, %d blocks, notes\n%s", tools, strings.Count(blocks, "\n"), ns, err, MaxBlocks, wantNotes)
		}
	})

	t.Run("nft output cut", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"nftables": [{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.1"}}, {"drop": null}]}}, {"set": {"family": "ip", "table": "t", "name": "big", "elem": [`)
		for b.Len() <= maxNftOutput {
			b.WriteString(`"10.0.0.1", `)
		}
		r := &replay{out: map[string]string{"nft -j list ruleset": b.String()}}
		tools, blocks, ns, err := fwText(t, r.run)
		if tools != "nftables" || blocks != "192.0.2.1/32 by nftables ip t c\n" || ns != "nftables: nft printed more than 16 MiB; read up to there\n" || err != nil {
			t.Errorf("got tools %q, blocks %q, notes %q, error %v; want the rule before the cut and a note", tools, blocks, ns, err)
		}
	})

	t.Run("broken nft output", func(t *testing.T) {
		r := &replay{out: map[string]string{"nft -j list ruleset": "table inet filter {\n", "iptables-save": ""}}
		tools, _, ns, err := fwText(t, r.run)
		if tools != "iptables" || !strings.HasPrefix(ns, "nftables: cannot read the JSON of nft -j list ruleset: ") || err != nil {
			t.Errorf("got tools %q, notes %q, error %v; want iptables and a note", tools, ns, err)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := func(ctx context.Context, _ int, tool string, _ ...string) ([]byte, error) {
			return nil, fmt.Errorf("%s: %w", tool, ctx.Err())
		}
		if _, _, err := ReadFirewall(ctx, r); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v; want context.Canceled", err)
		}
	})

	t.Run("timeout per tool", func(t *testing.T) {
		var deadlines []time.Duration
		r := func(ctx context.Context, _ int, tool string, _ ...string) ([]byte, error) {
			d, _ := ctx.Deadline()
			deadlines = append(deadlines, time.Until(d))
			return nil, fmt.Errorf("%s: %w", tool, ErrNotInstalled)
		}
		_, _, _ = ReadFirewall(context.Background(), r)
		for _, d := range deadlines {
			if d <= 0 || d > ToolTimeout {
				t.Errorf("a tool ran with %v left; want at most %v", d, ToolTimeout)
			}
		}
	})
}
