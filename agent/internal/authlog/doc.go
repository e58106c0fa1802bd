// Package authlog follows sshd's authentication log and counts, per source
// address over the last 24 hours, the failed and accepted logins it shows:
// what the agent reports as Logins for the coordinator's security findings.
// The agent gathers; the coordinator judges what is an attack.
//
// Three layers, each usable alone:
//
//   - ParseSyslog, ParseJournal and ParseMessage turn a line of a text log
//     (classic syslog or RFC 3339 timestamps) or a journal entry
//     (journalctl -o json) into an Event: pure functions, bounded, tested on
//     real lines of OpenSSH 7.x to 10.x and fuzzed.
//   - Aggregate follows each connection so that an attempt counts once
//     however many lines it leaves, and keeps per source the failures,
//     invalid users, user names, successes and times of the window, bounded
//     in sources, names and connections.
//   - Follower reads what was appended to the log files (through rotation
//     and truncation, a bounded amount per Poll) or, where none of them
//     exists, the journal through journalctl, and keeps how far it read and
//     the aggregate in a state file so that a restart neither counts a line
//     twice nor loses the window.
//
// Everything in these logs after the program name can be shaped by whoever
// connects to sshd: user names are bounded and cleaned, addresses are only
// IPv4 or IPv6 literals, and a line is taken apart from the side sshd wrote,
// never trusting a "from ADDR" the client may have put in its user name.
package authlog
