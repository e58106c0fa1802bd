package authlog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Bounds on the work of one Poll.
const (
	// pollBudget is how much of each log a Poll reads at most; a flood is
	// worked off over several polls instead of stalling the agent.
	pollBudget = 4 << 20
	// tailBytes is how much of a log's end is read the first time it is
	// seen, so that the last day's attacks show at once.
	tailBytes = 8 << 20
	// saveEvery is the least time between two writes of the state file.
	saveEvery = 10 * time.Second
	// fileGrace is how long the logs may all be missing (a rotation in
	// progress) before the journal is read instead.
	fileGrace = time.Minute
	// maxRotated bounds the rotated siblings looked at for a log's previous
	// file.
	maxRotated = 64
)

// QueryFunc runs a fixed read-only command and hands each line of its
// stdout to line until line returns false: hostquery.QueryLines.
type QueryFunc func(ctx context.Context, maxBytes, maxLine int, argv []string, line func([]byte) bool) (stderr string, err error)

// Config says where a Follower finds sshd's log and keeps its state.
type Config struct {
	// Files are the text logs to follow (the agent config's authLogs).
	// The journal is read only when none of them exists: where rsyslog
	// writes auth.log it takes it from the journal, and reading both would
	// count every event twice.
	Files []string
	// StateDir keeps the state file, so that a restart neither counts a
	// line twice nor loses the window. Empty: nothing is kept.
	StateDir string
	// Root is the host's / where the journal is looked for (an agent in a
	// container). Default /.
	Root string
	// Journalctl is the journalctl program. Default: the first of
	// /usr/bin/journalctl and /bin/journalctl that exists.
	Journalctl string
	// Query runs journalctl. Default hostquery.QueryLines where processes can
	// be run; without one there is no journal.
	Query QueryFunc
	// Location is the zone of classic syslog timestamps. Default the local
	// zone.
	Location *time.Location
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Gap is a part of the logs that could not be read while the rest was:
// Part names it (a file, "journal", "state").
type Gap struct {
	Part, Reason string
}

// Follower follows sshd's log, from text files or the journal, into an
// Aggregate. It is not safe for concurrent use.
type Follower struct {
	cfg    Config
	logger *slog.Logger
	agg    *Aggregate

	files   map[string]*fileState // by path
	journal journalState
	gate    journalGate
	// oldJournalctl says journalctl refused --output-fields (before
	// systemd 236).
	oldJournalctl bool

	polls     int
	fresh     bool            // no state was loaded
	missing   map[string]bool // files seen missing since the start
	lastFiles time.Time       // when a log file last existed
	usedJourn bool            // the journal was read since the start
	sources   []string        // log_sources of the last report
	dirty     bool            // the state changed since it was saved
	savedAt   time.Time
	// savedVersion is the aggregate's version when last saved.
	savedVersion uint64
	br           *bufio.Reader
	// budget and tail are pollBudget and tailBytes, smaller in tests.
	budget, tail int64

	report        *gridcityv1.Logins
	reportVersion uint64
}

// fileState is how far a log file was read.
type fileState struct {
	Path   string `json:"path"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
	// Skip says the offset is inside a line longer than MaxLine, whose
	// rest is passed over.
	Skip bool `json:"skip,omitempty"`
	// Head is the start of the file, to tell it from a new file that got
	// its inode.
	Head []byte `json:"head,omitempty"`
	// Gone says the file left the path; the next one there is new.
	Gone bool `json:"gone,omitempty"`
	// Prev is the file before a rotation, still being read to its end.
	Prev *fileState `json:"prev,omitempty"`
}

// New returns a Follower; it reads its state file at the first Poll.
func New(cfg Config, logger *slog.Logger) *Follower {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.Query == nil {
		cfg.Query = defaultQuery
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Follower{
		cfg:     cfg,
		logger:  logger,
		agg:     NewAggregate(),
		files:   map[string]*fileState{},
		missing: map[string]bool{},
		fresh:   true,
		br:      bufio.NewReaderSize(nil, 64<<10),
		budget:  pollBudget,
		tail:    tailBytes,
	}
}

// Poll reads what sshd logged since the last call, at most a few MiB of
// each log, and reports the sources of the window. When nothing changed it
// costs a stat per log file and returns the previous report, which the
// caller must not modify. Gaps are the parts it could not read while it
// read others; an error means no log could be read at all, or there is
// none.
func (f *Follower) Poll(ctx context.Context) (*gridcityv1.Logins, []Gap, error) {
	now := f.cfg.Now()
	if f.polls == 0 {
		f.load()
	}
	defer func() { f.polls++ }()

	infos := make([]os.FileInfo, len(f.cfg.Files))
	errs := make([]error, len(f.cfg.Files))
	exists := false
	for i, path := range f.cfg.Files {
		infos[i], errs[i] = os.Stat(path)
		if !errors.Is(errs[i], fs.ErrNotExist) {
			exists = true // unreadable is not missing
		}
	}
	if exists {
		f.lastFiles = now
	}

	var (
		gaps     []Gap
		sources  []string
		problems []string
		caughtUp = true
	)
	if exists || !f.lastFiles.IsZero() && now.Sub(f.lastFiles) < fileGrace {
		if f.journal != (journalState{}) {
			f.journal, f.dirty = journalState{}, true
		}
		for i, path := range f.cfg.Files {
			done, err := f.followFile(path, infos[i], errs[i], now)
			caughtUp = caughtUp && done
			switch {
			case err != nil:
				reason := fileError(path, err)
				gaps = append(gaps, Gap{Part: path, Reason: reason})
				problems = append(problems, reason)
			case errs[i] == nil:
				sources = append(sources, path)
			}
		}
		if !exists {
			sources = f.sources // all missing for a moment: a rotation
		}
	} else {
		done, err := f.followJournal(ctx, now)
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			sources = []string{"journal"}
		}
		caughtUp = done
	}
	if len(sources) == 0 && len(problems) > 0 {
		f.save(now) // what was read before the failure
		return nil, nil, errors.New(strings.Join(problems, "; "))
	}
	if caughtUp {
		f.agg.Expire(now)
	}
	if err := f.save(now); err != nil {
		f.logger.Warn("cannot save where the SSH logs were read", "err", err)
		gaps = append(gaps, Gap{Part: "state", Reason: "cannot save where the logs were read (a restart reads them again from their last 8 MiB): " + err.Error()})
	}
	f.sources = sources
	return f.build(now, sources), gaps, nil
}

// build returns the report, the previous one when nothing changed.
func (f *Follower) build(now time.Time, sources []string) *gridcityv1.Logins {
	f.agg.prune(now)
	if f.report != nil && f.reportVersion == f.agg.Version() && slices.Equal(f.report.LogSources, sources) {
		return f.report
	}
	f.report = &gridcityv1.Logins{LogSources: slices.Clone(sources), Sources: f.agg.Sources(now)}
	f.reportVersion = f.agg.Version()
	return f.report
}

// fileError words a failure to read a log for the gap.
func fileError(path string, err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return "permission denied reading " + path
	}
	return fmt.Sprintf("cannot read %s: %v", path, unwrapPath(err))
}

// unwrapPath drops the path a *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// followFile reads what was appended to path. done says it read to the end
// of the file (not stopped by the budget).
func (f *Follower) followFile(path string, fi os.FileInfo, statErr error, now time.Time) (done bool, err error) {
	st := f.files[path]
	if statErr != nil {
		if !errors.Is(statErr, fs.ErrNotExist) {
			return true, statErr
		}
		f.missing[path] = true
		if st != nil && !st.Gone {
			f.gone(st)
		}
		if st != nil && st.Prev != nil {
			// Rotated, the new file not created yet: finish the old one.
			return f.drainPrev(st, f.budget, now)
		}
		return true, nil
	}
	if !fi.Mode().IsRegular() {
		return true, fmt.Errorf("not a regular file")
	}
	dev, ino := fileID(fi)
	budget := f.budget
	switch {
	case st == nil:
		st = &fileState{Path: path, Dev: dev, Ino: ino}
		switch {
		case f.missing[path] && !f.usedJourn:
			// It appeared while we watched: all of it is new.
		case f.missing[path]:
			// The journal was read meanwhile and had these lines.
			st.Offset = fi.Size()
		default:
			// First sight: the last day's attacks are in its end.
			st.Offset = max(0, fi.Size()-f.tail)
			st.Skip = st.Offset > 0 // the first line is cut
			budget = f.tail
		}
		f.files[path] = st
		f.dirty = true
	case st.Gone:
		// The next file after a rotation or a deletion.
		*st = fileState{Path: path, Dev: dev, Ino: ino, Prev: st.Prev}
		if f.usedJourn {
			st.Offset = fi.Size()
		}
		f.dirty = true
	case st.Dev != dev || st.Ino != ino:
		f.rotated(st, dev, ino)
	case fi.Size() < st.Offset:
		f.logger.Info("SSH log truncated; reading it from the start", "path", path)
		st.Offset, st.Skip, st.Head, f.dirty = 0, false, nil, true
	}
	delete(f.missing, path)
	if st.Prev != nil {
		done, err := f.drainPrev(st, budget, now)
		if !done || err != nil {
			return done, err
		}
	}
	if fi.Size() == st.Offset {
		return true, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return true, err
	}
	defer file.Close()
	if fi, err = file.Stat(); err != nil {
		return true, err
	}
	if d, i := fileID(fi); d != st.Dev || i != st.Ino {
		return false, nil // rotated since the stat: the next poll sees it
	}
	if !f.sameHead(file, st) {
		// A new file that got the old one's inode (deleted, then created):
		// the inode alone cannot tell.
		f.logger.Info("SSH log replaced by a new file; reading it from the start", "path", path)
		st.Offset, st.Skip, st.Head, f.dirty = 0, false, nil, true
		f.sameHead(file, st)
	}
	return f.readFile(file, st, budget, false, now)
}

// headBytes is how much of a log's start tells it from another file.
const headBytes = 128

// sameHead reports whether file starts as the file st was following did
// (its first line holds a timestamp and a pid), and learns more of that
// start while it is shorter than headBytes.
func (f *Follower) sameHead(file *os.File, st *fileState) bool {
	buf := make([]byte, headBytes)
	n, err := file.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return true // unknown: keep following
	}
	if !bytes.HasPrefix(buf[:n], st.Head) {
		return false
	}
	if n > len(st.Head) {
		st.Head, f.dirty = buf[:n:n], true
	}
	return true
}

// gone records that a log's file left its path: renamed by a rotation (it
// is found beside it and read to its end) or deleted.
func (f *Follower) gone(st *fileState) {
	if st.Prev == nil {
		if old := findRotated(st.Path, st.Dev, st.Ino); old != "" {
			st.Prev = &fileState{Path: old, Dev: st.Dev, Ino: st.Ino, Offset: st.Offset, Skip: st.Skip}
		}
	}
	*st = fileState{Path: st.Path, Gone: true, Prev: st.Prev}
	f.dirty = true
}

// rotated moves st to a log's new file, keeping the old one to read to its
// end when it can be found beside it (auth.log.1, secure-20260101).
func (f *Follower) rotated(st *fileState, dev, ino uint64) {
	if st.Prev != nil {
		f.logger.Info("SSH log rotated again; done with its file before the last", "path", st.Prev.Path)
	}
	st.Prev = nil
	if old := findRotated(st.Path, st.Dev, st.Ino); old != "" {
		st.Prev = &fileState{Path: old, Dev: st.Dev, Ino: st.Ino, Offset: st.Offset, Skip: st.Skip}
	} else {
		f.logger.Info("SSH log rotated; its old file was not found beside it, so what was added to it last is not counted", "path", st.Path)
	}
	st.Dev, st.Ino, st.Offset, st.Skip = dev, ino, 0, false
	f.dirty = true
}

// findRotated returns the sibling of path that is the file (dev, ino).
func findRotated(path string, dev, ino uint64) string {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return ""
	}
	seen := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, base+".") && !strings.HasPrefix(name, base+"-") {
			continue
		}
		if seen++; seen > maxRotated {
			break
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			if d, i := fileID(fi); d == dev && i == ino {
				return p
			}
		}
	}
	return ""
}

// drainPrev reads a rotated file to its end. It is dropped once the new
// file exists and a poll found nothing added to the old one: the writer
// (rsyslog, until logrotate's HUP) has moved on.
func (f *Follower) drainPrev(st *fileState, budget int64, now time.Time) (bool, error) {
	p := st.Prev
	file, err := os.Open(p.Path)
	if err != nil {
		f.logger.Info("rotated SSH log gone before it was read to its end", "path", p.Path, "err", err)
		st.Prev, f.dirty = nil, true
		return true, nil
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return true, err
	}
	if d, i := fileID(fi); d != p.Dev || i != p.Ino || fi.Size() < p.Offset {
		st.Prev, f.dirty = nil, true
		return true, nil
	}
	start := p.Offset
	done, err := f.readFile(file, p, budget, false, now)
	if err != nil || !done {
		return done, err
	}
	if p.Offset == start && !st.Gone {
		// A last line without its newline is complete now.
		if _, err := f.readFile(file, p, budget, true, now); err != nil {
			return true, err
		}
		st.Prev, f.dirty = nil, true
	}
	return true, nil
}

// readFile reads complete lines of file from st.Offset, at most budget
// bytes, and advances st. A last line without its newline waits for the
// rest, unless final (a rotated file, complete).
func (f *Follower) readFile(file *os.File, st *fileState, budget int64, final bool, now time.Time) (done bool, err error) {
	if _, err := file.Seek(st.Offset, io.SeekStart); err != nil {
		return true, err
	}
	f.br.Reset(file)
	defer f.br.Reset(nil)
	start := st.Offset
	defer func() {
		if st.Offset != start {
			f.dirty = true
		}
	}()
	for st.Offset-start < budget {
		line, err := f.br.ReadSlice('\n')
		switch {
		case err == nil:
			st.Offset += int64(len(line))
			if st.Skip {
				st.Skip = false
				continue
			}
			f.line(line[:len(line)-1], now)
		case errors.Is(err, bufio.ErrBufferFull):
			st.Offset += int64(len(line))
			st.Skip = true
		case errors.Is(err, io.EOF):
			switch {
			case len(line) == 0:
			case st.Skip || len(line) > MaxLine:
				st.Offset += int64(len(line))
				st.Skip = true
			case final:
				st.Offset += int64(len(line))
				f.line(line, now)
			}
			return true, nil
		default:
			return true, err
		}
	}
	return false, nil
}

// line counts one line of a text log.
func (f *Follower) line(line []byte, now time.Time) {
	if len(line) > MaxLine {
		return
	}
	rec, ok := ParseSyslog(line, now, f.cfg.Location)
	if !ok {
		return
	}
	if ev, ok := ParseMessage(rec.Msg); ok {
		f.agg.Observe(now, rec.Time, rec.PID, ev)
	}
}
