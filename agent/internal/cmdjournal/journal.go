//go:build unix

// Package cmdjournal is the agent's at-most-once bookkeeping of approved
// commands, kept in one file in its state directory. A command id is
// journaled, durably, before the command runs, and an id the journal has
// seen is never run again, not after a restart and not after the
// coordinator has acknowledged its end (Forget keeps the id). After a
// reconnect the agent reports every entry the coordinator has not
// acknowledged (Unacked); a command that was running when the previous
// agent process ended cannot be collected, so it is reported as unknown,
// never run again.
//
// The coordinator never resends a dispatched command; the journal is the
// agent's own guard against a resend, a replay or a duplicate delivery.
package cmdjournal

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gridcity/gridcity/agent/internal/runner"

	"github.com/gridcity/gridcity/lib/atomicfile"
)

// State is where a command is in its life.
type State string

const (
	Accepted State = "accepted" // journaled, not started (or could not start yet)
	Started  State = "started"  // its process runs
	Exited   State = "exited"   // ended, or could not start (Reason says why)
	Unknown  State = "unknown"  // its fate cannot be told (Reason says why)
)

// ErrSeen is returned by Accept for an id the journal already knows: the
// command must not run again.
var ErrSeen = errors.New("command already seen")

// Reasons for entries whose fate is unknown.
const (
	reasonRestarted = "the agent restarted while it ran; its result cannot be collected"
	reasonRebooted  = "the server rebooted while it ran; its result cannot be collected"
	reasonDamaged   = "the agent's journal was damaged; this command's fate cannot be told"
)

// Bounds, so that the file (rewritten whole on every change) stays small.
const (
	// maxEntries bounds the entries not yet acknowledged. Past it the
	// oldest ended ones are dropped (their ids stay seen); the coordinator
	// then finds them missing from the journal and records them unknown.
	maxEntries = 1000
	// maxKeptBytes bounds the output held in all entries; past it the
	// oldest ended entries lose their output (their totals stay). Every
	// unacknowledged entry goes in the agent's hello, one message that
	// must stay under the coordinator's 4 MiB limit: this 1 MiB, plus
	// maxEntries entries of ids, times and a reason of at most
	// maxReasonBytes (about 1.2 MiB), plus the id and time of each
	// entry's accepted and started steps (about 0.1 MiB), leaves room
	// to spare.
	maxKeptBytes = 1 << 20
	// maxReasonBytes bounds an entry's reason, which may quote an error.
	maxReasonBytes = 1 << 10
	// maxSeen and seenFor bound the ids remembered after Forget.
	maxSeen = 10000
	seenFor = 30 * 24 * time.Hour
	// maxFileBytes is far above what the bounds allow; a larger file is
	// treated as damaged rather than read into memory.
	maxFileBytes = 64 << 20
)

const (
	fileName    = "journal.json"
	lockName    = "journal.lock"
	fileVersion = 1
)

// Entry is one command the journal holds. ExitCode is -1 unless the
// command exited by itself. The kept output is the head and tail described
// at runner.Result, already masked.
type Entry struct {
	ID          string    `json:"id"`
	State       State     `json:"state"`
	AcceptedAt  time.Time `json:"acceptedAt,omitzero"`
	StartedAt   time.Time `json:"startedAt,omitzero"`
	FinishedAt  time.Time `json:"finishedAt,omitzero"`
	PID         int       `json:"pid,omitempty"`
	ExitCode    int       `json:"exitCode"`
	TimedOut    bool      `json:"timedOut,omitempty"`
	DurationMs  int64     `json:"durationMs,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	StdoutTotal uint64    `json:"stdoutTotal,omitempty"`
	StderrTotal uint64    `json:"stderrTotal,omitempty"`
	StdoutKept  []byte    `json:"stdoutKept,omitempty"`
	StderrKept  []byte    `json:"stderrKept,omitempty"`
}

func (e *Entry) running() bool { return e.State == Accepted || e.State == Started }

// seenID is an id forgotten at At, remembered so that it is still refused.
type seenID struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// file is the journal on disk. Entries come before seen ids, which lets a
// damaged file's ids be told apart (see salvage).
type file struct {
	Version int      `json:"version"`
	BootID  string   `json:"bootId,omitempty"`
	Entries []Entry  `json:"entries"`
	Seen    []seenID `json:"seen"`
}

// Journal is safe for concurrent use.
type Journal struct {
	mu      sync.Mutex
	dir     string
	log     *slog.Logger
	now     func() time.Time
	bootID  string
	lock    *os.File
	entries map[string]*Entry
	seen    map[string]time.Time
	limits  limits
}

// limits are the bounds in force; tests lower them.
type limits struct {
	entries, keptBytes, seen int
}

// Open loads the journal in dir (created 0700 if missing) and takes it for
// this process: a second agent on the same state directory is refused,
// since it would run ids the first has seen and call the first's running
// commands unknown. Entries a previous process left accepted or started
// become unknown. A damaged file is moved aside and logged, not fatal.
func Open(dir string, log *slog.Logger) (*Journal, error) {
	return open(dir, log, time.Now, readBootID())
}

func open(dir string, log *slog.Logger, now func() time.Time, bootID string) (*Journal, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: state directory %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, log: log, now: now, bootID: bootID, lock: lock,
		entries: map[string]*Entry{}, seen: map[string]time.Time{},
		limits: limits{entries: maxEntries, keptBytes: maxKeptBytes, seen: maxSeen}}
	if err := j.load(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := j.save(); err != nil {
		lock.Close()
		return nil, err
	}
	return j, nil
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal: %s is in use by another gridcity-agent (one agent per state directory)", dir)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	return f, nil
}

// Close releases the journal for another process. Every change is already
// on disk.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lock == nil {
		return nil
	}
	err := j.lock.Close()
	j.lock = nil
	return err
}

// load reads the file and settles what the previous process left.
func (j *Journal) load() error {
	path := filepath.Join(j.dir, fileName)
	raw, err := readBounded(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil && !errors.Is(err, errTooLarge) {
		return fmt.Errorf("journal: read %s: %w", path, err)
	}
	var f file
	if err == nil {
		err = decode(raw, &f)
	}
	if err != nil {
		return j.setAside(path, raw, err)
	}
	now := j.now()
	rebooted := f.BootID != "" && j.bootID != "" && f.BootID != j.bootID
	for i := range f.Entries {
		e := f.Entries[i]
		if e.running() {
			e.Reason = leftRunningReason(e.PID, rebooted)
			e.State, e.ExitCode, e.FinishedAt = Unknown, -1, now
		}
		j.entries[e.ID] = &e
	}
	for _, s := range f.Seen {
		j.seen[s.ID] = s.At
	}
	j.prune()
	// A file written under a larger bound (an older agent) is cut to this
	// one before its entries go in a hello.
	j.boundKept()
	return nil
}

var errTooLarge = errors.New("larger than the journal can be")

func readBounded(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("%d bytes: %w", fi.Size(), errTooLarge)
	}
	return os.ReadFile(path)
}

// decode parses the file and checks what the journal relies on.
func decode(raw []byte, f *file) error {
	if err := json.Unmarshal(raw, f); err != nil {
		return err
	}
	if f.Version != fileVersion {
		return fmt.Errorf("version %d, want %d", f.Version, fileVersion)
	}
	ids := map[string]bool{}
	for _, e := range f.Entries {
		switch {
		case e.ID == "":
			return errors.New("an entry without an id")
		case ids[e.ID]:
			return fmt.Errorf("entry %q twice", e.ID)
		case e.State != Accepted && e.State != Started && e.State != Exited && e.State != Unknown:
			return fmt.Errorf("entry %q in state %q", e.ID, e.State)
		}
		ids[e.ID] = true
	}
	return nil
}

// leftRunningReason says why a command the previous process was running
// cannot be collected. A process still alive (signal 0 reaches it) was
// left running on purpose: stopping the agent does not stop its commands.
func leftRunningReason(pid int, rebooted bool) string {
	if rebooted {
		return reasonRebooted
	}
	if pid > 0 {
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			return fmt.Sprintf("still running after the agent restarted (pid %d); its result cannot be collected", pid)
		}
	}
	return reasonRestarted
}

// idField finds ids in a damaged journal. It is compiled on first use: its
// bounded repetition costs about half a megabyte, which an agent with a
// healthy journal should never pay.
var idField = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.){1,512}")`)
})

// setAside moves a damaged file away and keeps what can be read of it.
//
// The ids in a damaged file are what the journal exists to remember, and
// they cannot all be trusted to be found again. Refusing every command
// until someone repairs the file would stop the agent for good with no
// clear way out, so the journal starts afresh and relies on the
// coordinator, which never resends a dispatched command, as the first
// guard. What can be salvaged still counts: every id found among the
// entries is reported unknown (so the coordinator records that) and every
// id found is refused if it comes again.
func (j *Journal) setAside(path string, raw []byte, cause error) error {
	aside := fmt.Sprintf("%s.damaged-%s", path, j.now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("journal: %s is damaged (%v) and cannot be moved aside: %w", path, cause, err)
	}
	entries, seen := salvage(raw)
	j.log.Error("journal damaged: moved aside; commands it held are reported unknown and their ids refused",
		"path", path, "moved_to", aside, "err", cause, "salvaged_ids", len(entries)+len(seen))
	now := j.now()
	for _, id := range entries {
		j.entries[id] = &Entry{ID: id, State: Unknown, ExitCode: -1, FinishedAt: now, Reason: reasonDamaged}
	}
	for _, id := range seen {
		if j.entries[id] == nil {
			j.seen[id] = now
		}
	}
	j.prune()
	return nil
}

// salvage returns the ids found before the "seen" key (entries) and after.
func salvage(raw []byte) (entries, seen []string) {
	split := strings.Index(string(raw), `"seen":`)
	for _, m := range idField().FindAllSubmatchIndex(raw, -1) {
		id, err := strconv.Unquote(string(raw[m[2]:m[3]]))
		if err != nil || id == "" {
			continue
		}
		if split >= 0 && m[0] > split {
			seen = append(seen, id)
		} else {
			entries = append(entries, id)
		}
	}
	return entries, seen
}

// Accept journals a new command before it runs. It returns ErrSeen
// (wrapped) for an id the journal knows, and returns only once the entry
// is on disk.
func (j *Journal) Accept(id string) error {
	if id == "" {
		return errors.New("journal: accept: empty command id")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[id]; ok {
		return fmt.Errorf("journal: accept %s: %w", id, ErrSeen)
	}
	if _, ok := j.seen[id]; ok {
		return fmt.Errorf("journal: accept %s: %w (its end was acknowledged)", id, ErrSeen)
	}
	if j.makeRoom() {
		return fmt.Errorf("journal: accept %s: %d commands are already running", id, len(j.entries))
	}
	j.entries[id] = &Entry{ID: id, State: Accepted, AcceptedAt: j.now(), ExitCode: -1}
	if err := j.save(); err != nil {
		// Not on disk, so not accepted: the command must not run.
		delete(j.entries, id)
		return fmt.Errorf("journal: accept %s: %w", id, err)
	}
	return nil
}

// makeRoom drops the oldest ended entries while the journal is full, and
// reports whether it is still full (everything in it running).
func (j *Journal) makeRoom() (full bool) {
	for len(j.entries) >= j.limits.entries {
		oldest := j.oldest(func(e *Entry) bool { return !e.running() })
		if oldest == nil {
			return true
		}
		j.log.Warn("journal full: dropping the oldest unacknowledged result; the coordinator will record it unknown",
			"command", oldest.ID, "state", oldest.State, "max_entries", j.limits.entries)
		delete(j.entries, oldest.ID)
		j.seen[oldest.ID] = j.now()
	}
	return false
}

// oldest returns the earliest accepted entry that ok accepts, or nil.
func (j *Journal) oldest(ok func(*Entry) bool) *Entry {
	var o *Entry
	for _, e := range j.entries {
		if ok(e) && (o == nil || before(e, o)) {
			o = e
		}
	}
	return o
}

func before(a, b *Entry) bool {
	if c := a.AcceptedAt.Compare(b.AcceptedAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// Started records the command's process id.
func (j *Journal) Started(id string, pid int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[id]
	if !ok || e.State != Accepted {
		return fmt.Errorf("journal: started %s: %s", id, j.describe(id))
	}
	e.State, e.StartedAt, e.PID = Started, j.now(), pid
	if err := j.save(); err != nil {
		return fmt.Errorf("journal: started %s: %w", id, err)
	}
	return nil
}

// Finished records how the command ended, with the output kept for a
// report after a reconnect (cut to the first HeadBytes and last TailBytes
// if longer).
func (j *Journal) Finished(id string, r runner.Result, stdoutKept, stderrKept []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[id]
	if !ok || !e.running() {
		return fmt.Errorf("journal: finished %s: %s", id, j.describe(id))
	}
	e.State, e.FinishedAt = Exited, j.now()
	e.ExitCode, e.TimedOut, e.DurationMs = r.ExitCode, r.TimedOut, r.Duration.Milliseconds()
	e.StdoutTotal, e.StderrTotal = r.StdoutTotal, r.StderrTotal
	e.StdoutKept, e.StderrKept = headAndTail(stdoutKept), headAndTail(stderrKept)
	switch {
	case r.Err != nil:
		e.Reason = boundReason("could not start: " + r.Err.Error())
	case r.Canceled:
		e.Reason = "canceled"
	}
	j.boundKept()
	if err := j.save(); err != nil {
		return fmt.Errorf("journal: finished %s: %w", id, err)
	}
	return nil
}

// boundReason cuts a reason to maxReasonBytes, at a character boundary.
func boundReason(r string) string {
	const more = "…"
	if len(r) <= maxReasonBytes {
		return r
	}
	cut := maxReasonBytes - len(more)
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut] + more
}

func headAndTail(b []byte) []byte {
	if len(b) <= runner.HeadBytes+runner.TailBytes {
		return slices.Clone(b)
	}
	return append(slices.Clone(b[:runner.HeadBytes]), b[len(b)-runner.TailBytes:]...)
}

// boundKept drops the output of the oldest ended entries while all the
// output held is over maxKeptBytes.
func (j *Journal) boundKept() {
	total := 0
	for _, e := range j.entries {
		total += len(e.StdoutKept) + len(e.StderrKept)
	}
	for total > j.limits.keptBytes {
		o := j.oldest(func(e *Entry) bool { return len(e.StdoutKept)+len(e.StderrKept) > 0 })
		if o == nil {
			return
		}
		total -= len(o.StdoutKept) + len(o.StderrKept)
		o.StdoutKept, o.StderrKept = nil, nil
		if o.Reason == "" {
			o.Reason = fmt.Sprintf("output not kept: the agent's journal holds at most %d KiB of output", j.limits.keptBytes>>10)
		}
	}
}

func (j *Journal) describe(id string) string {
	if e, ok := j.entries[id]; ok {
		return "it is " + string(e.State)
	}
	if _, ok := j.seen[id]; ok {
		return "it was forgotten"
	}
	return "it was never accepted"
}

// Unacked returns copies of every entry the coordinator has not
// acknowledged, oldest first, for Hello.journal after a (re)connect.
// Running entries are included: the coordinator learns they are still
// under way.
func (j *Journal) Unacked() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Entry, 0, len(j.entries))
	for _, e := range j.entries {
		c := *e
		c.StdoutKept, c.StderrKept = slices.Clone(e.StdoutKept), slices.Clone(e.StderrKept)
		out = append(out, c)
	}
	sortEntries(out)
	return out
}

// Forget drops ended entries whose end the coordinator has recorded
// (JournalAck). Their ids stay remembered, and so refused, for seenFor
// (at most maxSeen of them). An id of a command still running is kept:
// its end is not recorded yet, whatever the ack says. Unknown ids are
// remembered too; forgetting twice is harmless.
func (j *Journal) Forget(ids ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	for _, id := range ids {
		if e, ok := j.entries[id]; ok {
			if e.running() {
				j.log.Warn("journal: the coordinator acknowledged a command that is still running; kept", "command", id, "state", e.State)
				continue
			}
			delete(j.entries, id)
		}
		j.seen[id] = now
	}
	j.prune()
	if err := j.save(); err != nil {
		return fmt.Errorf("journal: forget %d ids: %w", len(ids), err)
	}
	return nil
}

// prune drops remembered ids past seenFor, then the oldest past maxSeen.
func (j *Journal) prune() {
	cutoff := j.now().Add(-seenFor)
	for id, at := range j.seen {
		if at.Before(cutoff) {
			delete(j.seen, id)
		}
	}
	if len(j.seen) <= j.limits.seen {
		return
	}
	all := j.seenList()
	for _, s := range all[:len(all)-j.limits.seen] {
		delete(j.seen, s.ID)
	}
}

// seenList returns the remembered ids, oldest first.
func (j *Journal) seenList() []seenID {
	all := make([]seenID, 0, len(j.seen))
	for id, at := range j.seen {
		all = append(all, seenID{ID: id, At: at})
	}
	// sort.Slice, not slices.SortFunc: a SortFunc over a struct type
	// compiles a sorter of its own, about 10 KiB of the binary; ids are
	// unique, so the order is the same.
	sort.Slice(all, func(a, b int) bool {
		return cmp.Or(all[a].At.Compare(all[b].At), strings.Compare(all[a].ID, all[b].ID)) < 0
	})
	return all
}

// save writes the whole journal durably: a temporary file, fsync, rename
// over the old one, fsync of the directory so the rename itself survives a
// power loss. A crash at any point leaves the old file or the new one.
func (j *Journal) save() error {
	f := file{Version: fileVersion, BootID: j.bootID, Entries: make([]Entry, 0, len(j.entries)), Seen: j.seenList()}
	for _, e := range j.entries {
		f.Entries = append(f.Entries, *e)
	}
	sortEntries(f.Entries)
	raw, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return atomicfile.Write(j.dir, fileName, raw)
}

// readBootID tells one boot from the next, so that pids recorded before a
// reboot are not taken for live processes. "" where the kernel has none.
func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sortEntries orders entries by acceptance, then id. sort.Slice, not
// slices.SortFunc: a SortFunc over a struct type compiles a sorter of its
// own, about 10 KiB of the binary; ids are unique, so the order is the same.
func sortEntries(es []Entry) {
	sort.Slice(es, func(a, b int) bool {
		return cmp.Or(es[a].AcceptedAt.Compare(es[b].AcceptedAt), strings.Compare(es[a].ID, es[b].ID)) < 0
	})
}
