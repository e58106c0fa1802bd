package authlog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// journalRecheck is the longest the journal goes unread while its
	// files seem unchanged: a change within the file system's timestamp
	// granularity could hide from the stat.
	journalRecheck = time.Minute
	// journalQuiet is the least time between two reads while the last one
	// found nothing of sshd's: other programs logging make the journal
	// change every few seconds, and a journalctl costs tens of
	// milliseconds of CPU on a journal of a few hundred MiB. An attack
	// shows within this; while sshd logs, the journal is read every Poll.
	journalQuiet = 15 * time.Second
)

// journalctls are where journalctl is looked for.
var journalctls = []string{"/usr/bin/journalctl", "/bin/journalctl"}

// journalState is how far the journal was read.
type journalState struct {
	// Cursor is the last entry read.
	Cursor string `json:"cursor,omitempty"`
	// Since is where to start without a cursor, in unix seconds.
	Since int64 `json:"since,omitempty"`
	// Last is the time of the last entry read, where to start again if
	// the cursor is refused (the journal was rotated away).
	Last int64 `json:"last,omitempty"`
}

// journalGate remembers the journal's active files as they were at the
// last read, so that an unchanged journal costs a stat, not a journalctl.
type journalGate struct {
	key string
	at  time.Time
	// quiet says the last read found no entry of sshd's.
	quiet bool
}

// followJournal reads sshd's journal entries since the last call, at most
// pollBudget bytes of journalctl's output. done says it read to the end.
//
// journalctl runs as a bounded query, not as a long-running `journalctl
// --follow`: the collector has no life of its own to tie a child process
// to, a child that outlives the agent (or is stuck) is worse than a short
// query, and a following journalctl holds some 15 MiB of memory beside an
// agent of 13. The query's cost (some 40 ms of CPU on a 200 MiB journal)
// is paid only when the journal's active files changed, and at most every
// journalQuiet while sshd logs nothing.
func (f *Follower) followJournal(ctx context.Context, now time.Time) (done bool, err error) {
	bin := f.journalctl()
	dirs := []string{filepath.Join(f.cfg.Root, "run/log/journal"), filepath.Join(f.cfg.Root, "var/log/journal")}
	key, found, known := journalFiles(dirs)
	if bin == "" || f.cfg.Query == nil {
		return true, fmt.Errorf("no SSH log: %s and journalctl is not installed", f.noFiles())
	}
	if known && !found {
		return true, fmt.Errorf("no SSH log: %s and there is no journal (no journal files in %s)", f.noFiles(), strings.Join(dirs, ", "))
	}
	if known && key == f.gate.key && now.Sub(f.gate.at) < journalRecheck {
		return true, nil
	}
	if f.gate.quiet && now.Sub(f.gate.at) < journalQuiet {
		return true, nil
	}
	if f.journal.Cursor == "" && f.journal.Since == 0 {
		f.journal.Since = now.Unix()
		if f.fresh && f.polls == 0 {
			// First start: the last day's attacks show at once.
			f.journal.Since = now.Add(-Window).Unix()
		}
	}
	f.usedJourn = true

	// Not --quiet: it would hide journalctl's warning that it cannot see
	// the system's entries.
	argv := []string{bin, "-o", "json", "--no-pager"}
	if !f.oldJournalctl {
		argv = append(argv, "--output-fields=MESSAGE,SYSLOG_IDENTIFIER,SYSLOG_PID,_PID")
	}
	if f.cfg.Root != "/" {
		argv = append(argv, "--root="+f.cfg.Root)
	}
	if f.journal.Cursor != "" {
		argv = append(argv, "--after-cursor="+f.journal.Cursor)
	} else {
		argv = append(argv, "--since=@"+strconv.FormatInt(f.journal.Since, 10))
	}
	for _, id := range idents {
		argv = append(argv, "SYSLOG_IDENTIFIER="+id)
	}

	read, found, stopped := 0, false, false
	stderr, err := f.cfg.Query(ctx, int(f.budget)+MaxJournalEntry, MaxJournalEntry, argv, func(line []byte) bool {
		read += len(line) + 1
		rec, cursor, ok := ParseJournal(line)
		if cursor != "" && cursor != f.journal.Cursor {
			f.journal.Cursor, f.dirty = cursor, true
		}
		if ok {
			found = true
			f.journal.Last = max(f.journal.Last, rec.Time.Unix())
			if ev, ok := ParseMessage(rec.Msg); ok {
				f.agg.Observe(now, rec.Time, rec.PID, ev)
			}
		}
		if int64(read) >= f.budget {
			stopped = true
			return false
		}
		return true
	})
	switch {
	case err != nil && !f.oldJournalctl && strings.Contains(err.Error(), "output-fields"):
		// Before systemd 236: all fields then, at the next Poll.
		f.oldJournalctl, f.gate = true, journalGate{}
		return false, nil
	case err != nil && f.journal.Cursor != "" && strings.Contains(err.Error(), "cursor"):
		// The entry is gone (the journal was vacuumed): go on from its time.
		f.logger.Warn("journal cursor refused; reading on from the time of the last entry", "err", err)
		f.journal = journalState{Since: f.journal.Last, Last: f.journal.Last}
		if f.journal.Since == 0 {
			f.journal.Since = now.Unix()
		}
		f.dirty, f.gate = true, journalGate{}
		return false, nil
	case err != nil:
		return true, fmt.Errorf("cannot read the journal: %w", err)
	case strings.Contains(stderr, "insufficient permissions") || strings.Contains(stderr, "not seeing messages from other users and the system"):
		return true, fmt.Errorf("permission denied reading the journal: %s", stderr)
	case strings.Contains(stderr, "No journal files were found"):
		return true, fmt.Errorf("no SSH log: %s and there is no journal (%s)", f.noFiles(), stderr)
	}
	if stopped {
		// More is waiting: the next Poll reads on, changed or not.
		f.gate = journalGate{}
		return false, nil
	}
	f.gate = journalGate{key: key, at: now, quiet: !found}
	return true, nil
}

// noFiles words that none of the log files exists.
func (f *Follower) noFiles() string {
	switch len(f.cfg.Files) {
	case 0:
		return "no auth log is configured"
	case 1:
		return f.cfg.Files[0] + " does not exist"
	}
	return "none of " + strings.Join(f.cfg.Files, ", ") + " exists"
}

func (f *Follower) journalctl() string {
	if f.cfg.Journalctl != "" {
		if _, err := os.Stat(f.cfg.Journalctl); err == nil {
			return f.cfg.Journalctl
		}
		return ""
	}
	for _, p := range journalctls {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// journalFiles describes the journal's active system files (path, inode,
// size, modification time) in dirs. found says a journal exists there;
// known is false when a directory could not be read, so that neither can
// be told.
func journalFiles(dirs []string) (key string, found, known bool) {
	var b strings.Builder
	known = true
	for _, dir := range dirs {
		machines, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			known = false
			continue
		}
		for i, m := range machines {
			if i >= 16 || !m.IsDir() {
				continue
			}
			p := filepath.Join(dir, m.Name(), "system.journal")
			fi, err := os.Stat(p)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					known = false
				} else if hasJournalFile(filepath.Join(dir, m.Name())) {
					found = true // archived files only: journalctl decides
					known = false
				}
				continue
			}
			found = true
			dev, ino := fileID(fi)
			fmt.Fprintf(&b, "%s %d %d %d %d\n", p, dev, ino, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String(), found, known
}

func hasJournalFile(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".journal") {
			return true
		}
	}
	return false
}
