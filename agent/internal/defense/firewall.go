package defense

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gridcity/gridcity/agent/internal/hostquery"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// ErrNotInstalled is what a Runner returns, wrapped, for a tool the host
// does not have.
var ErrNotInstalled = errors.New("not installed")

// ToolTimeout bounds each run of a tool: they read kernel state and answer
// in milliseconds, fail2ban-client in a tenth of a second.
const ToolTimeout = 5 * time.Second

// A Runner runs one firewall tool, named without its directory ("nft"),
// and returns at most maxBytes of what it printed. Like hostquery.Query, it
// returns the output cut at maxBytes with an error wrapping
// hostquery.ErrOutputTruncated, and an error naming the tool otherwise ("nft:
// not installed", "/usr/sbin/nft exited with code 1: ..."). The agent's
// resolves the tool in the system directories and runs it with
// hostquery.Query; tests replay captured output.
type Runner func(ctx context.Context, maxBytes int, tool string, args ...string) ([]byte, error)

// Bounds on what the tools may print. nft lists whole sets, which
// blocklists (CrowdSec's, say) fill with tens of thousands of networks.
const (
	maxNftOutput      = 16 << 20
	maxIptablesOutput = 16 << 20
	maxIpsetOutput    = 16 << 20
	maxFail2banOutput = 4 << 20
)

// Note is a part of the firewall that could not be read while the rest
// was: Part is the tool's ("nftables", "iptables", "ip6tables", "ipset",
// "fail2ban") or "firewall" for the whole.
type Note struct {
	Part, Reason string
}

// ReadFirewall asks every firewall tool the host has which source networks
// it drops or rejects. A tool that is not installed is left out quietly; a
// tool that is installed but fails is left out with a Note. It returns an
// error only when no tool could be read at all, naming each one's reason.
// Blocks are de-duplicated, sorted and at most MaxBlocks; Tools lists the
// tools that were read, sorted.
func ReadFirewall(ctx context.Context, run Runner) (*gridcityv1.Firewall, []Note, error) {
	r := &firewallRead{run: run}
	skip := map[nftKey]bool{}
	for _, t := range []struct{ tool, family string }{{"iptables", "ip"}, {"ip6tables", "ip6"}} {
		save := r.iptables(ctx, t.tool)
		if save != nil && save.nfTables {
			// iptables-nft keeps its tables in nftables too; they are
			// reported once, the way their owner wrote them.
			for _, table := range save.tables {
				skip[nftKey{t.family, table, ""}] = true
			}
		}
	}
	r.nft(ctx, skip)
	r.ipsets(ctx)
	r.fail2ban(ctx)

	if len(r.tools) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("no firewall tool could be read: nft, iptables-save and fail2ban-client are missing or not permitted (%s)", strings.Join(r.failures, "; "))
	}
	blocks, left := normalize(r.list.blocks, MaxBlocks)
	if left += r.list.dropped; left > 0 {
		r.notes = append(r.notes, Note{"firewall", fmt.Sprintf("%d more blocked networks not listed (at most %d are)", left, MaxBlocks)})
	}
	fw := &gridcityv1.Firewall{Tools: r.tools}
	slices.Sort(fw.Tools)
	for _, b := range blocks {
		fw.Blocks = append(fw.Blocks, &gridcityv1.Block{Network: b.Network.String(), By: b.By})
	}
	return fw, r.notes, nil
}

// firewallRead is one ReadFirewall.
type firewallRead struct {
	run      Runner
	tools    []string
	notes    []Note
	failures []string // every tool's reason, for the error when none was read
	list     blockList
	setRefs  []setRef
}

// query runs a tool; ok is false when there is no usable output, after
// recording why. Output cut at its bound is used, with a note, and cut set.
func (r *firewallRead) query(ctx context.Context, part string, maxBytes int, tool string, args ...string) (out []byte, cut, ok bool) {
	out, err := r.runTool(ctx, maxBytes, tool, args...)
	switch {
	case err == nil:
		return out, false, true
	case errors.Is(err, hostquery.ErrOutputTruncated):
		r.notes = append(r.notes, Note{part, fmt.Sprintf("%s printed more than %d MiB; read up to there", tool, maxBytes>>20)})
		return out, true, true
	case errors.Is(err, ErrNotInstalled):
		r.failures = append(r.failures, err.Error())
	default:
		reason := err.Error()
		if tool == "fail2ban-client" {
			reason = tool + ": " + fail2banError(reason)
		}
		r.failures = append(r.failures, reason)
		r.notes = append(r.notes, Note{part, reason})
	}
	return nil, false, false
}

func (r *firewallRead) runTool(ctx context.Context, maxBytes int, tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	return r.run(ctx, maxBytes, tool, args...)
}

func (r *firewallRead) iptables(ctx context.Context, tool string) *iptablesSave {
	out, _, ok := r.query(ctx, tool, maxIptablesOutput, tool+"-save")
	if !ok {
		return nil
	}
	save := parseIptablesSave(out, tool)
	r.tools = append(r.tools, tool)
	r.list.blocks = append(r.list.blocks, save.blocks.blocks...)
	r.list.dropped += save.blocks.dropped
	r.setRefs = append(r.setRefs, save.sets...)
	return save
}

func (r *firewallRead) nft(ctx context.Context, skip map[nftKey]bool) {
	out, cut, ok := r.query(ctx, "nftables", maxNftOutput, "nft", "-j", "list", "ruleset")
	if !ok {
		return
	}
	blocks, dropped, err := parseNft(out, skip)
	if err != nil && !cut {
		// Whole output that does not parse: nothing of it is trusted.
		r.failures = append(r.failures, "nft: cannot read its JSON: "+err.Error())
		r.notes = append(r.notes, Note{"nftables", "cannot read the JSON of nft -j list ruleset: " + err.Error()})
		return
	}
	r.tools = append(r.tools, "nftables")
	r.list.blocks = append(r.list.blocks, blocks...)
	r.list.dropped += dropped
}

// ipsets reads the members of the ipsets that iptables rules drop by, when
// there are such rules.
func (r *firewallRead) ipsets(ctx context.Context) {
	if len(r.setRefs) == 0 {
		return
	}
	want := map[string]bool{}
	for _, s := range r.setRefs {
		want[s.set] = true
	}
	out, err := r.runTool(ctx, maxIpsetOutput, "ipset", "save")
	if err != nil && !errors.Is(err, hostquery.ErrOutputTruncated) {
		r.notes = append(r.notes, Note{"ipset", "iptables rules drop by ipset, whose members could not be read: " + err.Error()})
		return
	}
	sets := parseIpsetSave(out, want)
	r.list.dropped += sets.dropped
	ipsetBlocks(r.setRefs, sets, &r.list)
}

// fail2ban asks fail2ban which addresses each jail has banned: in one call
// where fail2ban has `banned`, else with `status` and `status JAIL` for
// each jail (a Python process each).
func (r *firewallRead) fail2ban(ctx context.Context) {
	const tool = "fail2ban-client"
	out, err := r.runTool(ctx, maxFail2banOutput, tool, "banned")
	if errors.Is(err, ErrNotInstalled) {
		r.failures = append(r.failures, err.Error())
		return
	}
	if err == nil || errors.Is(err, hostquery.ErrOutputTruncated) {
		if bans, dropped, ok := parseFail2banBanned(out); ok {
			r.tools = append(r.tools, "fail2ban")
			r.list.dropped += dropped
			// In order, so that the blocks kept past a bound are the
			// same every time.
			for _, jail := range slices.Sorted(maps.Keys(bans)) {
				for _, n := range bans[jail] {
					r.list.add(n, byJail(jail))
				}
			}
			return
		}
	}

	// fail2ban before `banned` (0.11.1 and older).
	out, _, ok := r.query(ctx, "fail2ban", maxFail2banOutput, tool, "status")
	if !ok {
		return
	}
	jails, ok := parseFail2banJails(out)
	if !ok {
		r.failures = append(r.failures, tool+": no jail list in its status")
		r.notes = append(r.notes, Note{"fail2ban", "no jail list in the output of fail2ban-client status"})
		return
	}
	r.tools = append(r.tools, "fail2ban")
	for _, jail := range jails {
		out, _, ok := r.query(ctx, "fail2ban", maxFail2banOutput, tool, "status", jail)
		if !ok {
			continue
		}
		nets, dropped, _ := parseFail2banJail(out)
		r.list.dropped += dropped
		for _, n := range nets {
			r.list.add(n, byJail(jail))
		}
	}
}
