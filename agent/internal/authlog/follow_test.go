package authlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 12, 2, 18, 0, 0, 0, utc)

// logLine writes a line as rsyslog does.
func logLine(at time.Time, pid int, msg string) string {
	return fmt.Sprintf("%s web-1 sshd[%d]: %s\n", at.UTC().Format(time.Stamp), pid, msg)
}

func failLine(at time.Time, pid int, addr, user string) string {
	return logLine(at, pid, fmt.Sprintf("Failed password for %s from %s port 22 ssh2", user, addr))
}

// noise is a line of another program, as auth.log holds many.
func noise(at time.Time) string {
	return fmt.Sprintf("%s web-1 CRON[4242]: pam_unix(cron:session): session closed for user root\n", at.UTC().Format(time.Stamp))
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// testFollower follows files with a test clock and no journal (the root is
// an empty directory) unless cfg says otherwise.
func testFollower(t *testing.T, cfg Config, clk *clock) *Follower {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.Query == nil {
		cfg.Query = func(context.Context, int, int, []string, func([]byte) bool) (string, error) {
			t.Error("journalctl ran")
			return "", nil
		}
	}
	if cfg.Journalctl == "" {
		cfg.Journalctl = "/nonexistent/journalctl"
	}
	cfg.Location, cfg.Now = utc, clk.now
	return New(cfg, nil)
}

func poll(t *testing.T, f *Follower) *gridcityv1.Logins {
	t.Helper()
	l, gaps, err := f.Poll(context.Background())
	if err != nil || len(gaps) > 0 {
		t.Fatalf("got gaps %v, error %v", gaps, err)
	}
	return l
}

// failures sums the failures of a report by address.
func failures(l *gridcityv1.Logins) string {
	var parts []string
	for _, s := range l.GetSources() {
		parts = append(parts, fmt.Sprintf("%s=%d", s.Address, s.Failures))
	}
	return strings.Join(parts, " ")
}

func TestFollowFirstStartReadsTheTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.log")
	var b strings.Builder
	b.WriteString(failLine(t0.Add(-2*time.Hour), 1, "192.0.2.1", "root")) // before the tail
	for b.Len() < 4<<10 {
		b.WriteString(noise(t0.Add(-time.Hour)))
	}
	b.WriteString(failLine(t0.Add(-30*time.Hour), 2, "192.0.2.2", "root")) // in the tail, out of the window
	b.WriteString(failLine(t0.Add(-20*time.Hour), 3, "192.0.2.3", "root"))
	b.WriteString(failLine(t0.Add(-time.Minute), 4, "192.0.2.3", "admin"))
	appendTo(t, path, b.String())

	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	f.tail = 1 << 10
	l := poll(t, f)
	if got := failures(l); got != "192.0.2.3=2" {
		t.Errorf("got %q; want only the window in the tail, 192.0.2.3=2", got)
	}
	if !slices.Equal(l.LogSources, []string{path}) {
		t.Errorf("got sources %q; want %q", l.LogSources, path)
	}
}

func TestFollowAppendedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, failLine(t0, 10, "192.0.2.1", "root"))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	first := poll(t, f)
	if got := failures(first); got != "192.0.2.1=1" {
		t.Fatalf("got %q; want 192.0.2.1=1", got)
	}
	clk.add(5 * time.Second)
	if again := poll(t, f); again != first {
		t.Error("an unchanged log gave a new report")
	}

	appendTo(t, path, failLine(clk.t, 11, "192.0.2.1", "root")+failLine(clk.t, 11, "192.0.2.2", "admin")[:20])
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=2" {
		t.Errorf("got %q; want 192.0.2.1=2 and the half-written line waiting", got)
	}
	appendTo(t, path, failLine(clk.t, 11, "192.0.2.2", "admin")[20:])
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=2 192.0.2.2=1" {
		t.Errorf("got %q; want 192.0.2.1=2 192.0.2.2=1", got)
	}
}

func TestFollowRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.log")
	appendTo(t, path, failLine(t0, 20, "192.0.2.1", "root"))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	poll(t, f)

	// logrotate: a line lands in the old file after the last read, the
	// file is renamed and a new one created; rsyslog writes on into it.
	appendTo(t, path, failLine(t0, 21, "192.0.2.1", "root"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=2" {
		t.Errorf("between rename and create: got %q; want the old file read to its end, 192.0.2.1=2", got)
	}
	appendTo(t, path+".1", failLine(t0, 22, "192.0.2.1", "root")) // before rsyslog's HUP
	appendTo(t, path, failLine(t0, 23, "192.0.2.2", "root"))
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=3 192.0.2.2=1" {
		t.Errorf("after create: got %q; want 192.0.2.1=3 192.0.2.2=1", got)
	}

	// A rotation whose old file is gone (compressed at once): the new file
	// is read from its start.
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".2")
	appendTo(t, path, failLine(t0, 24, "192.0.2.3", "root")+failLine(t0, 24, "192.0.2.3", "root"))
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=3 192.0.2.3=2 192.0.2.2=1" {
		t.Errorf("old file gone: got %q; want 192.0.2.1=3 192.0.2.3=2 192.0.2.2=1", got)
	}
}

func TestFollowTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, failLine(t0, 30, "192.0.2.1", "root")+noise(t0)+noise(t0))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	poll(t, f)
	// copytruncate, then a short line: the offset is past the end.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, failLine(t0, 31, "192.0.2.2", "root"))
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=1 192.0.2.2=1" {
		t.Errorf("got %q; want 192.0.2.1=1 192.0.2.2=1", got)
	}
}

func TestFollowFileAppearsLater(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "auth.log"), filepath.Join(dir, "secure")
	appendTo(t, a, noise(t0))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{a, b}}, clk)
	f.tail = 1 << 10
	if l := poll(t, f); !slices.Equal(l.LogSources, []string{a}) {
		t.Errorf("got sources %q; want %q", l.LogSources, a)
	}
	// It appeared while followed: all of it is new, not only its tail.
	var text strings.Builder
	text.WriteString(failLine(t0, 40, "192.0.2.1", "root"))
	for text.Len() < 4<<10 {
		text.WriteString(noise(t0))
	}
	text.WriteString(failLine(t0, 41, "192.0.2.2", "root"))
	appendTo(t, b, text.String())
	clk.add(5 * time.Second)
	f.budget = 64 << 10
	l := poll(t, f)
	if got := failures(l); got != "192.0.2.1=1 192.0.2.2=1" {
		t.Errorf("got %q; want 192.0.2.1=1 192.0.2.2=1", got)
	}
	if !slices.Equal(l.LogSources, []string{a, b}) {
		t.Errorf("got sources %q; want both", l.LogSources)
	}
}

func TestFollowBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, noise(t0))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	f.budget = 1 << 10
	poll(t, f)
	var b strings.Builder
	for i := range 100 {
		b.WriteString(failLine(t0, 1000+i, "192.0.2.1", "root"))
	}
	appendTo(t, path, b.String())
	polls := 0
	for ; polls < 100; polls++ {
		clk.add(5 * time.Second)
		before := f.files[path].Offset
		poll(t, f)
		if read := f.files[path].Offset - before; read > f.budget+MaxLine {
			t.Fatalf("one poll read %d bytes; want at most about %d", read, f.budget)
		}
		if fi, _ := os.Stat(path); f.files[path].Offset == fi.Size() {
			break
		}
	}
	if polls < 5 {
		t.Errorf("read %d bytes in %d polls; want the budget to spread them", b.Len(), polls+1)
	}
	if got := failures(f.build(clk.t, nil)); got != "192.0.2.1=100" {
		t.Errorf("got %q; want 192.0.2.1=100", got)
	}
}

func TestFollowLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, noise(t0))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	poll(t, f)

	longFail := logLine(t0, 50, "Failed password for "+strings.Repeat("a", MaxLine)+" from 192.0.2.9 port 22 ssh2")
	huge := logLine(t0, 51, "Failed password for "+strings.Repeat("b", 200<<10)+" from 192.0.2.9 port 22 ssh2")
	appendTo(t, path, longFail+failLine(t0, 52, "192.0.2.1", "root")+huge+failLine(t0, 53, "192.0.2.1", "root"))
	// A long line still being written when read, and its end later.
	partial := logLine(t0, 54, "Failed password for "+strings.Repeat("c", 2*MaxLine)+" from 192.0.2.9 port 22 ssh2")
	appendTo(t, path, partial[:MaxLine+100])
	clk.add(5 * time.Second)
	poll(t, f)
	appendTo(t, path, partial[MaxLine+100:]+failLine(t0, 55, "192.0.2.1", "root"))
	clk.add(5 * time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=3" {
		t.Errorf("got %q; want 192.0.2.1=3 and the long lines dropped", got)
	}
}

func TestFollowRestart(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "auth.log")
	appendTo(t, path, failLine(t0, 60, "192.0.2.1", "root")+logLine(t0, 61, "Invalid user admin from 192.0.2.2 port 5"))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}, StateDir: state}, clk)
	poll(t, f)
	fi, err := os.Stat(filepath.Join(state, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v; want 0600", fi.Mode().Perm())
	}
	// Read, counted, but not saved yet (less than saveEvery later).
	appendTo(t, path, failLine(t0, 62, "192.0.2.1", "root"))
	clk.add(time.Second)
	if got := failures(poll(t, f)); got != "192.0.2.1=2" {
		t.Fatalf("got %q; want 192.0.2.1=2", got)
	}

	// A restart two hours later: the line after the saved offset is read
	// again and counted once; the connection still open at the save (pid
	// 61) ends in the window.
	appendTo(t, path, logLine(t0.Add(time.Minute), 61, "Connection closed by invalid user admin 192.0.2.2 port 5 [preauth]"))
	clk.add(2 * time.Hour)
	g := testFollower(t, Config{Files: []string{path}, StateDir: state}, clk)
	if got := failures(poll(t, g)); got != "192.0.2.1=2 192.0.2.2=1" {
		t.Errorf("after a restart: got %q; want 192.0.2.1=2 192.0.2.2=1", got)
	}
	// And once more, from the state that restart saved.
	h := testFollower(t, Config{Files: []string{path}, StateDir: state}, clk)
	if got := failures(poll(t, h)); got != "192.0.2.1=2 192.0.2.2=1" {
		t.Errorf("after a second restart: got %q; want 192.0.2.1=2 192.0.2.2=1", got)
	}
	entries, _ := os.ReadDir(state)
	if len(entries) != 1 {
		t.Errorf("state directory holds %d files; want only %s", len(entries), stateFileName)
	}
}

// logBuffer collects a logger's output.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestFollowDamagedState(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":         "{\x00garbage",
		"another version":  `{"version":99}`,
		"a bad address":    `{"version":1,"aggregate":{"sources":[{"addr":"x","buckets":[{"h":1,"first":3600,"last":3600}]}]}}`,
		"a negative place": `{"version":1,"files":[{"path":"p","offset":-1}],"aggregate":{"sources":[]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path, state := filepath.Join(t.TempDir(), "auth.log"), t.TempDir()
			appendTo(t, path, failLine(t0, 70, "192.0.2.1", "root"))
			if err := os.WriteFile(filepath.Join(state, stateFileName), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			clk := &clock{t0}
			f := New(Config{Files: []string{path}, StateDir: state, Root: t.TempDir(), Location: utc, Now: clk.now}, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := failures(poll(t, f)); got != "192.0.2.1=1" {
				t.Errorf("got %q; want a first start, 192.0.2.1=1", got)
			}
			if !strings.Contains(logs.String(), "starting over") {
				t.Errorf("logged %q; want the damaged state reported", logs.String())
			}
		})
	}
}

func TestFollowStateNotWritable(t *testing.T) {
	path, state := filepath.Join(t.TempDir(), "auth.log"), t.TempDir()
	appendTo(t, path, failLine(t0, 80, "192.0.2.1", "root"))
	// A directory where the state file belongs: unreadable and unwritable,
	// even for root.
	if err := os.Mkdir(filepath.Join(state, stateFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}, StateDir: state}, clk)
	l, gaps, err := f.Poll(context.Background())
	if err != nil || failures(l) != "192.0.2.1=1" {
		t.Fatalf("got %q, %v; want the log read anyway", failures(l), err)
	}
	if len(gaps) != 1 || gaps[0].Part != "state" || !strings.Contains(gaps[0].Reason, "cannot save") {
		t.Errorf("got gaps %+v; want one about saving the state", gaps)
	}
}

func TestFollowGaps(t *testing.T) {
	dir := t.TempDir()
	log, notFile, missing := filepath.Join(dir, "auth.log"), filepath.Join(dir, "secure"), filepath.Join(dir, "messages")
	appendTo(t, log, failLine(t0, 90, "192.0.2.1", "root"))
	if err := os.Mkdir(notFile, 0o755); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t0}

	// One log cannot be read, another can: a gap beside the report.
	f := testFollower(t, Config{Files: []string{notFile, log, missing}}, clk)
	l, gaps, err := f.Poll(context.Background())
	if err != nil || !slices.Equal(l.GetLogSources(), []string{log}) {
		t.Fatalf("got %v, %v; want %s read", l.GetLogSources(), err, log)
	}
	if want := []Gap{{Part: notFile, Reason: "cannot read " + notFile + ": not a regular file"}}; !slices.Equal(gaps, want) {
		t.Errorf("got gaps %+v; want %+v", gaps, want)
	}

	// None can: the collector's error, never an empty report.
	f = testFollower(t, Config{Files: []string{notFile}}, clk)
	if l, _, err := f.Poll(context.Background()); err == nil || err.Error() != "cannot read "+notFile+": not a regular file" {
		t.Errorf("got %v, %v; want the error", l, err)
	}

	// None exists and there is no journal.
	root := t.TempDir()
	for _, tt := range []struct {
		name       string
		journalctl string
		want       string
	}{
		{"no journal", "/bin/sh", "no SSH log: none of " + missing + ", " + filepath.Join(dir, "nope") + " exists and there is no journal (no journal files in " + root + "/run/log/journal, " + root + "/var/log/journal)"},
		{"no journalctl", "/nonexistent/journalctl", "no SSH log: none of " + missing + ", " + filepath.Join(dir, "nope") + " exists and journalctl is not installed"},
	} {
		f = testFollower(t, Config{Files: []string{missing, filepath.Join(dir, "nope")}, Root: root, Journalctl: tt.journalctl}, clk)
		if _, _, err := f.Poll(context.Background()); err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v; want %q", tt.name, err, tt.want)
		}
	}
}

func TestFollowPermissionDenied(t *testing.T) {
	if got, want := fileError("/var/log/auth.log", &fs.PathError{Op: "open", Path: "/var/log/auth.log", Err: fs.ErrPermission}), "permission denied reading /var/log/auth.log"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, failLine(t0, 91, "192.0.2.1", "root"))
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	f := testFollower(t, Config{Files: []string{path}}, &clock{t0})
	if _, _, err := f.Poll(context.Background()); err == nil || err.Error() != "permission denied reading "+path {
		t.Errorf("got %v; want permission denied", err)
	}
}

func TestFollowRotationGrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.log")
	appendTo(t, path, failLine(t0, 100, "192.0.2.1", "root"))
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{path}}, clk)
	poll(t, f)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	// Missing for less than fileGrace: no journal, no error, same sources.
	clk.add(30 * time.Second)
	if l := poll(t, f); !slices.Equal(l.LogSources, []string{path}) {
		t.Errorf("got sources %q; want %q kept", l.LogSources, path)
	}
}

// fakeJournal answers journalctl queries from the entries of the fixture,
// after the cursor it is given.
type fakeJournal struct {
	t       *testing.T
	entries [][]byte
	calls   [][]string
	stderr  string
	fail    func(argv []string) error
}

func (j *fakeJournal) query(_ context.Context, maxBytes, maxLine int, argv []string, line func([]byte) bool) (string, error) {
	j.calls = append(j.calls, slices.Clone(argv))
	if j.fail != nil {
		if err := j.fail(argv); err != nil {
			return "", err
		}
	}
	start := 0
	for _, a := range argv {
		if c, ok := strings.CutPrefix(a, "--after-cursor="); ok {
			start = len(j.entries)
			for i, e := range j.entries {
				if _, cursor, _ := ParseJournal(e); cursor == c {
					start = i + 1
				}
			}
		}
	}
	for _, e := range j.entries[start:] {
		if !line(e) {
			break
		}
	}
	return j.stderr, nil
}

func (j *fakeJournal) last() string { return strings.Join(j.calls[len(j.calls)-1], " ") }

// journalRoot makes a root holding a journal's active file.
func journalRoot(t *testing.T) (root, active string) {
	root = t.TempDir()
	active = filepath.Join(root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal")
	if err := os.MkdirAll(filepath.Dir(active), 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo(t, active, "LPKSHHRH")
	return root, active
}

func TestFollowJournal(t *testing.T) {
	root, active := journalRoot(t)
	j := &fakeJournal{t: t, entries: bytes.Split(bytes.TrimSpace([]byte(mustRead(t, "testdata/journal-systemd252.json"))), []byte("\n"))}
	clk := &clock{time.Date(2026, 12, 2, 18, 53, 47, 0, utc)}
	f := testFollower(t, Config{Files: []string{filepath.Join(root, "var/log/auth.log")}, Root: root, Journalctl: "/bin/sh", Query: j.query}, clk)

	l := poll(t, f)
	want := fmt.Sprintf("/bin/sh -o json --no-pager --output-fields=MESSAGE,SYSLOG_IDENTIFIER,SYSLOG_PID,_PID --root=%s --since=@%d SYSLOG_IDENTIFIER=sshd SYSLOG_IDENTIFIER=sshd-session SYSLOG_IDENTIFIER=sshd-auth",
		root, clk.t.Add(-Window).Unix())
	if got := j.last(); got != want {
		t.Errorf("first start ran\n%s\nwant\n%s", got, want)
	}
	if got, want := sourcesText(l.Sources), strings.Join([]string{
		"2001:db8::7 failures=1 invalid=0 users=root+0 seen=17:53:47..17:53:47",
		"203.0.113.10 failures=1 invalid=1 users=\uFFFDadm+0 seen=17:53:47..17:53:47",
		"203.0.113.9 failures=1 invalid=1 users=admin+0 seen=17:53:47..17:53:47",
		"198.51.100.4 failures=0 invalid=0 users=+0 seen=17:53:47..17:53:47 ok=1 last=deploy@17:53:47 before=0",
	}, "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !slices.Equal(l.LogSources, []string{"journal"}) {
		t.Errorf("got sources %q; want journal", l.LogSources)
	}

	// The journal's files did not change: no journalctl.
	clk.add(5 * time.Second)
	poll(t, f)
	if len(j.calls) != 1 {
		t.Errorf("journalctl ran %d times; want once while the journal is unchanged", len(j.calls))
	}
	// They changed: read on from the cursor.
	appendTo(t, active, "x")
	clk.add(5 * time.Second)
	poll(t, f)
	if len(j.calls) != 2 || !strings.Contains(j.last(), "--after-cursor=s=36cf01170b694aa4bcb97f46131717cf;i=167;") {
		t.Errorf("got %d runs, the last %q; want a second from the last cursor", len(j.calls), j.last())
	}
	// That read found nothing of sshd's: other programs' lines are read
	// only every journalQuiet.
	appendTo(t, active, "x")
	clk.add(5 * time.Second)
	poll(t, f)
	if len(j.calls) != 2 {
		t.Errorf("journalctl ran %d times; want no third within %v of a quiet read", len(j.calls), journalQuiet)
	}
	clk.add(journalQuiet)
	poll(t, f)
	if len(j.calls) != 3 {
		t.Errorf("journalctl ran %d times; want a third after %v", len(j.calls), journalQuiet)
	}
	// Unchanged but not read for a while: read anyway.
	clk.add(journalRecheck)
	poll(t, f)
	if len(j.calls) != 4 {
		t.Errorf("journalctl ran %d times; want a fourth after %v", len(j.calls), journalRecheck)
	}
}

func TestFollowJournalTrouble(t *testing.T) {
	root, active := journalRoot(t)
	entries := bytes.Split(bytes.TrimSpace([]byte(mustRead(t, "testdata/journal-systemd252.json"))), []byte("\n"))
	clk := &clock{time.Date(2026, 12, 2, 18, 53, 47, 0, utc)}
	newF := func(j *fakeJournal) *Follower {
		return testFollower(t, Config{Files: []string{filepath.Join(root, "auth.log")}, Root: root, Journalctl: "/bin/sh", Query: j.query}, clk)
	}
	touch := func() { appendTo(t, active, "x"); clk.add(5 * time.Second) }

	// The cursor is gone (journal vacuumed): on from the last entry's time.
	j := &fakeJournal{t: t, entries: entries}
	f := newF(j)
	poll(t, f)
	j.fail = func(argv []string) error {
		if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--after-cursor") }) {
			return errors.New("/bin/journalctl exited with code 1: Failed to seek to cursor: Invalid argument")
		}
		return nil
	}
	touch()
	poll(t, f)
	touch()
	poll(t, f)
	if !strings.Contains(j.last(), "--since=@1796234027 ") {
		t.Errorf("ran %q; want --since the last entry", j.last())
	}

	// A journalctl before systemd 236.
	j = &fakeJournal{t: t, entries: entries, fail: func(argv []string) error {
		if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--output-fields") }) {
			return errors.New("/bin/journalctl exited with code 1: journalctl: unrecognized option '--output-fields=MESSAGE'")
		}
		return nil
	}}
	f = newF(j)
	poll(t, f)
	touch()
	if got := failures(poll(t, f)); len(j.calls) != 2 || strings.Contains(j.last(), "--output-fields") || got == "" {
		t.Errorf("got %q after %d runs, the last %q; want a run without --output-fields", got, len(j.calls), j.last())
	}

	// Not allowed to see the system's entries: journalctl says so on
	// stderr and exits 0. That is no empty report.
	j = &fakeJournal{t: t, stderr: "Hint: You are currently not seeing messages from other users and the system."}
	f = newF(j)
	if _, _, err := f.Poll(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "permission denied reading the journal") {
		t.Errorf("got %v; want permission denied", err)
	}
}

// TestFollowJournalBudget reads a journal bigger than a Poll's budget: the
// polls after the first read on although the journal does not change.
func TestFollowJournalBudget(t *testing.T) {
	root, _ := journalRoot(t)
	var entries [][]byte
	for i := range 200 {
		entries = append(entries, fmt.Appendf(nil, `{"__CURSOR":"c%d","__REALTIME_TIMESTAMP":"%d","SYSLOG_IDENTIFIER":"sshd-session","SYSLOG_PID":"%d","MESSAGE":"Failed password for root from 192.0.2.1 port %d ssh2"}`,
			i, t0.Add(-time.Hour).UnixMicro(), 1000+i, 1000+i))
	}
	j := &fakeJournal{t: t, entries: entries}
	clk := &clock{t0}
	f := testFollower(t, Config{Files: []string{filepath.Join(root, "auth.log")}, Root: root, Journalctl: "/bin/sh", Query: j.query}, clk)
	f.budget = 4 << 10
	for range 20 {
		poll(t, f)
		clk.add(5 * time.Second)
	}
	if got := failures(f.build(clk.t, nil)); got != "192.0.2.1=200" {
		t.Errorf("got %q after %d runs; want 192.0.2.1=200", got, len(j.calls))
	}
}

func TestFollowFilesOverJournal(t *testing.T) {
	root, _ := journalRoot(t)
	path := filepath.Join(t.TempDir(), "auth.log")
	appendTo(t, path, failLine(t0, 110, "192.0.2.1", "root"))
	clk := &clock{t0}
	// testFollower's query fails the test if journalctl runs.
	f := testFollower(t, Config{Files: []string{path}, Root: root, Journalctl: "/bin/sh"}, clk)
	if got := failures(poll(t, f)); got != "192.0.2.1=1" {
		t.Errorf("got %q; want 192.0.2.1=1", got)
	}
}

// BenchmarkPollIdle is the cost of a Poll when nothing was logged: what
// the agent pays every 5 s.
func BenchmarkPollIdle(b *testing.B) {
	dir := b.TempDir()
	auth, secure := filepath.Join(dir, "auth.log"), filepath.Join(dir, "secure")
	text := mustRead(b, "testdata/openssh-9.2-debian12.log")
	if err := os.WriteFile(auth, []byte(strings.Repeat(text, 100)), 0o644); err != nil {
		b.Fatal(err)
	}
	clk := &clock{time.Date(2026, 12, 2, 18, 0, 0, 0, utc)}
	f := New(Config{Files: []string{auth, secure}, StateDir: b.TempDir(), Root: dir, Location: utc, Now: clk.now}, nil)
	if _, _, err := f.Poll(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.Poll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPollFlood is the cost of reading one budget's worth of a
// brute-force attack.
func BenchmarkPollFlood(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "auth.log")
	var text strings.Builder
	for i := 0; text.Len() < pollBudget; i++ {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		text.WriteString(logLine(at, 1000+i, fmt.Sprintf("Invalid user u%d from 10.0.%d.%d port 4000", i%500, i/250%250, i%250)))
		text.WriteString(failLine(at, 1000+i, fmt.Sprintf("10.0.%d.%d", i/250%250, i%250), fmt.Sprintf("u%d", i%500)))
	}
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(text.Len()))
	for b.Loop() {
		f := New(Config{Files: []string{path}, Root: dir, Location: utc, Now: (&clock{t0.Add(time.Hour)}).now}, nil)
		if _, _, err := f.Poll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPollIdleJournal is the same where the journal is read: a stat of
// its active file, no journalctl.
func BenchmarkPollIdleJournal(b *testing.B) {
	root := b.TempDir()
	active := filepath.Join(root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal")
	if err := os.MkdirAll(filepath.Dir(active), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(active, []byte("LPKSHHRH"), 0o640); err != nil {
		b.Fatal(err)
	}
	runs := 0
	query := func(context.Context, int, int, []string, func([]byte) bool) (string, error) { runs++; return "", nil }
	clk := &clock{t0}
	f := New(Config{Files: []string{filepath.Join(root, "auth.log")}, Root: root, Journalctl: "/bin/sh", Query: query, Location: utc, Now: clk.now}, nil)
	if _, _, err := f.Poll(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.Poll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if runs != 1 {
		b.Errorf("journalctl ran %d times; want once", runs)
	}
}
