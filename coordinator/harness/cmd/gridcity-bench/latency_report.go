package main

import (
	"fmt"
	"strings"
)

// latencyRows are the command latency figures: for each command, median and
// p90 (p99 when there are at least 100 samples) of gridcity's approval →
// result next to ssh localhost with a new connection (the headline) and
// over a multiplexed one.
func latencyRows(lat latencyRun) []Row {
	fresh := "ssh localhost, new connection"
	mux := "ssh localhost, multiplexed"
	if v := sshShortVersion(lat.SSHVersion); v != "" {
		fresh += " (" + v + ")"
		mux += " (" + v + ")"
	}
	pcts := []float64{50, 90}
	if lat.N >= 100 {
		pcts = append(pcts, 99)
	}
	var rows []Row
	for i, c := range lat.Commands {
		name := "`" + c.Command + "` approval → result"
		for _, p := range pcts {
			label := pctLabel(p)
			g := pct(c.Gridcity, p)
			var notes string
			switch {
			case p == 50 && i == 0:
				notes = latencyNotes(lat, c, true)
			case p == 50:
				notes = latencyNotes(lat, c, false)
			default:
				notes = fmt.Sprintf("%s (nearest rank) of the same %d samples of each side; largest: gridcity %.1f ms, ssh with a new connection %.1f ms.",
					label, len(c.Gridcity), maxF(c.Gridcity), maxF(c.SSHFresh))
			}
			rows = append(rows, compare(name+", "+label, "ms", g, pct(c.SSHFresh, p), fresh, 0, notes))
		}
		for _, p := range pcts {
			label := pctLabel(p)
			notes := fmt.Sprintf("%s of the same %d gridcity samples next to ssh over a connection opened beforehand with ControlMaster "+
				"(ssh -M -N, as ControlMaster=auto with ControlPersist keeps one): each command still starts an ssh client process "+
				"(ssh -V alone takes %.1f ms here), which asks the master for a new session channel; sshd forks the session and runs the command "+
				"with the user's login shell; no TCP connection, key exchange or authentication. Range %.1f–%.1f ms.",
				label, len(c.Gridcity), lat.SSHClientMs, minF(c.SSHMux), maxF(c.SSHMux))
			if p != 50 {
				notes = fmt.Sprintf("%s (nearest rank) of the same samples; largest: gridcity %.1f ms, ssh multiplexed %.1f ms.", label, maxF(c.Gridcity), maxF(c.SSHMux))
			}
			rows = append(rows, compare(name+", "+label+", multiplexed ssh", "ms", pct(c.Gridcity, p), pct(c.SSHMux, p), mux, 0, notes))
		}
	}
	return rows
}

func pctLabel(p float64) string {
	if p == 50 {
		return "median"
	}
	return fmt.Sprintf("p%.0f", p)
}

// pct is the median for 50 (the mean of the middle two for an even count),
// else the nearest-rank percentile.
func pct(v []float64, p float64) float64 {
	if p == 50 {
		return medianF(v)
	}
	return percentile(v, p)
}

func minF(v []float64) float64 { lo, _ := minMax(v); return lo }
func maxF(v []float64) float64 { _, hi := minMax(v); return hi }

// sshShortVersion turns "OpenSSH_9.2p1 Debian-2+deb12u10" into "OpenSSH 9.2p1".
func sshShortVersion(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	return strings.Replace(f[0], "_", " ", 1)
}

// latencyNotes says what each side of a median row includes; full is for
// the first command, the others refer to it.
func latencyNotes(lat latencyRun, c commandLatencies, full bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples of each side after %d warm-up ones, the sides taking turns; range gridcity %.1f–%.1f ms, ssh %.1f–%.1f ms. ",
		len(c.Gridcity), lat.Warmup, minF(c.Gridcity), maxF(c.Gridcity), minF(c.SSHFresh), maxF(c.SSHFresh))
	if full {
		fmt.Fprintf(&b, "gridcity: from just before the approver's POST /api/requests/{id}/approve is sent (logged in, the card shown, %d ms after it appeared) "+
			"until run_command's result reaches a live MCP client session (go-sdk, Streamable HTTP on loopback) that asked for it: "+
			"the approval committed and audited in SQLite, the dispatch audited, the command sent down the agent's gRPC/TLS stream, "+
			"journaled by the agent with fsync before anything runs, /bin/sh -c forked and exec'd as %s in its own session, its start and its exit journaled (fsync each) "+
			"and reported over gRPC, audited and stored by the coordinator, and run_command's response. ", lat.SettleMs, orUnknown(lat.RunAs))
	} else {
		b.WriteString("Both sides include what the `" + lat.Commands[0].Command + "` row says, and the output coming back. ")
	}
	fmt.Fprintf(&b, "Median stages, from the audit rows' times (1 ms resolution, so each ±1 ms): %s; the approve POST itself returns in %.1f ms (median), "+
		"and the agent timed the command itself at %.0f ms. ", stageSummary(c), medianF(c.Approve), medianF(c.AgentRunMs))
	if full {
		fmt.Fprintf(&b, "ssh: `ssh -o BatchMode=yes -i KEY -p PORT 127.0.0.1 %s` (-F with the known host), a new process and connection each time: "+
			"the client starting, TCP, key exchange (%s, %s), host key check, ed25519 public-key authentication, a session, the command run by sshd with the user's login shell (%s), "+
			"its exit status, and the connection closed. ", c.Command, orUnknown(lat.SSHKex), orUnknown(lat.SSHCipher), orUnknown(lat.Shell))
		b.WriteString("Neither side includes a person's time to decide, which in use dwarfs both.")
	}
	return b.String()
}

func stageSummary(c commandLatencies) string {
	var parts []string
	for _, name := range stageNames {
		if v := c.Stages[name]; len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", name, medianF(v)))
		}
	}
	if len(parts) == 0 {
		return "none recorded"
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func latencyMethod(lat latencyRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command latency, after the window with the same coordinator and agent: an MCP client (go-sdk, one live session with an operate token) calls run_command with `true` and with `echo hello`; "+
		"the driver, logged in to the approval app as admin, polls GET /api/requests?status=pending for the card, approves it %d ms after it appears, and times from just before the approve POST "+
		"to run_command's result at the client. The peer is %s's sshd on a free 127.0.0.1 port, started with -D -f CONFIG -E LOG from its own sshd_config, ed25519 host key and authorized_keys in a temporary directory "+
		"(public keys only, UsePAM no, StrictModes no because the directory sits under the world-writable /tmp, SetEnv SHLVL=1), logging in %s, the user the agent runs commands as (%s). ",
		lat.SettleMs, orUnknown(lat.SSHDPackage), orUnknown(lat.User), orUnknown(lat.RunAs))
	if lat.ShellRcMs >= 1 {
		fmt.Fprintf(&b, "SHLVL=1 keeps bash, which sshd starts for the command, from reading ~/.bashrc as it does for sshd's commands: on this machine that file would add %.0f ms to every ssh command (measured here), which is this machine's, not ssh's; gridcity's /bin/sh reads none. ", lat.ShellRcMs)
	} else {
		b.WriteString("SHLVL=1 keeps bash, which sshd starts for the command, from reading ~/.bashrc as it does for sshd's commands; gridcity's /bin/sh reads none. ")
	}
	b.WriteString("Debian's stock sshd_config (UsePAM yes, with its session modules) would only make ssh slower. ")
	fmt.Fprintf(&b, "After %d warm-up rounds, %d rounds: in each, for each command, gridcity, ssh with a new connection and ssh over a ControlMaster connection take turns, the first one rotating. "+
		"Medians are the middle of the samples, p90 and p99 their nearest rank; p99 only with at least 100 samples. ", lat.Warmup, lat.N)
	if lat.JournalSaveMs > 0 {
		fmt.Fprintf(&b, "On the agent's state directory, one journal save as the journal does it (temporary file written, fsync, rename, directory fsync) took %.2f ms (median) at the journal's size then, %.1f KiB, "+
			"and %.2f ms at %.0f KiB, the size at its bound of %d remembered command ids. ", lat.JournalSaveMs, float64(lat.JournalBytes)/1024, lat.JournalFullSaveMs, float64(lat.JournalFullBytes)/1024, journalMaxSeen)
	}
	fmt.Fprintf(&b, "At the end: %s.", lat.MachineNote)
	return b.String()
}
