package collect

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The fixture tables are little-endian; so is every machine Go's linux
// tests run on but s390x and ppc64, where this test would read them wrong.
func skipBigEndian(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("fixture socket tables are little-endian")
	}
}

func TestSocketsCollectorOwners(t *testing.T) {
	skipBigEndian(t)
	c := newSocketsCollector(Config{ProcRoot: "testdata/proc"}, nil).(*socketsCollector)
	var out gridcityv1.StateUpdate
	n := &notes{name: "sockets"}
	if err := c.update(context.Background(), &out, n); err != nil {
		t.Fatal(err)
	}
	want := map[uint32]string{22: "sshd/812", 53: "systemd-resolve/650", 68: "dhclient/700", 80: "nginx/1001", 323: "chronyd/760", 2049: "/0", 5432: "postgres/900"}
	for _, l := range out.GetListeners().GetItems() {
		if got := l.GetProcess() + "/" + strconv.Itoa(int(l.GetPid())); got != want[l.GetPort()] {
			t.Errorf("%s %s:%d: got owner %q; want %q", l.GetProto(), l.GetAddress(), l.GetPort(), got, want[l.GetPort()])
		}
	}
	if len(n.gaps) != 0 {
		t.Errorf("got gaps %v; want none", n.gaps)
	}
	if out.GetConnections() == nil {
		t.Error("got no connections section")
	}
}

// TestSocketsCollectorCache checks that the processes are searched only
// when a listener appears that was not looked for before.
func TestSocketsCollectorCache(t *testing.T) {
	skipBigEndian(t)
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "net"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "42", "fd"), 0o755))
	must(os.WriteFile(filepath.Join(root, "42", "comm"), []byte("redis-server\n"), 0o644))
	must(os.Symlink("socket:[777]", filepath.Join(root, "42", "fd", "6")))
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	redis := "   0: 00000000:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0 100 0 0 10 0\n"
	ghost := "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 888 1 0 100 0 0 10 0\n"
	must(os.WriteFile(filepath.Join(root, "net", "udp"), []byte(header), 0o644))
	setTCP := func(body string) { must(os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(header+body), 0o644)) }

	c := newSocketsCollector(Config{ProcRoot: root}, nil).(*socketsCollector)
	run := func() *gridcityv1.Listeners {
		t.Helper()
		var out gridcityv1.StateUpdate
		if err := c.update(context.Background(), &out, &notes{name: "sockets"}); err != nil {
			t.Fatal(err)
		}
		return out.GetListeners()
	}
	setTCP(redis)
	if l := run(); l.GetItems()[0].GetProcess() != "redis-server" {
		t.Fatalf("got %v; want redis-server on 6379", l)
	}
	// With the descriptor gone, only the cache can still name redis: a
	// second search would not find it.
	must(os.Remove(filepath.Join(root, "42", "fd", "6")))
	if l := run(); l.GetItems()[0].GetProcess() != "redis-server" {
		t.Errorf("second sample: got %v; want the cached owner, without a search", l)
	}

	// A new listener owned by nobody is searched for once, then cached as
	// unknown.
	setTCP(redis + ghost)
	l := run()
	if got := l.GetItems()[1]; got.GetPort() != 8080 || got.GetProcess() != "" {
		t.Errorf("got %v; want 8080 without a process", got)
	}
	if o, ok := c.owners[888]; !ok || o.pid != 0 {
		t.Errorf("got cache entry %v, %v for 888; want an unknown owner cached", o, ok)
	}

	// A closed listener leaves the cache.
	setTCP(ghost)
	run()
	if _, ok := c.owners[777]; ok {
		t.Error("closed listener 777 still cached")
	}
}

// TestSocketsCollectorSkipsEmptyTables checks that a table whose family
// has no socket in use is not generated: the kernel walks its whole hash
// table for it.
func TestSocketsCollectorSkipsEmptyTables(t *testing.T) {
	skipBigEndian(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	listener := "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0 100 0 0 10 0\n"
	files := map[string]string{
		"tcp": "", "udp": "", "udp6": "",
		// Stale on purpose: were it read, the listener would show.
		"tcp6":      "  sl  local_address remote_address st\n" + listener,
		"sockstat6": "TCP6: inuse 0\nUDP6: inuse 0\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, "net", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newSocketsCollector(Config{ProcRoot: root}, nil)
	var out gridcityv1.StateUpdate
	if err := c.update(context.Background(), &out, &notes{name: "sockets"}); err != nil {
		t.Fatal(err)
	}
	if n := len(out.GetListeners().GetItems()); n != 0 {
		t.Errorf("got %d listeners; want tcp6 skipped", n)
	}

	files["sockstat6"] = "TCP6: inuse 1\n"
	if err := os.WriteFile(filepath.Join(root, "net", "sockstat6"), []byte(files["sockstat6"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.update(context.Background(), &out, &notes{name: "sockets"}); err != nil {
		t.Fatal(err)
	}
	if n := len(out.GetListeners().GetItems()); n != 1 {
		t.Errorf("got %d listeners; want the tcp6 one once sockets are in use", n)
	}
}
