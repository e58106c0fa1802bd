package collect

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// fakeStatfs answers statfs from a table: a path missing from it fails
// with EACCES, and a path in hang blocks until release is closed.
type fakeStatfs struct {
	sizes   map[string]uint64
	hang    map[string]bool
	release chan struct{}
}

func (f *fakeStatfs) statfs(path string, st *unix.Statfs_t) error {
	if f.hang[path] {
		<-f.release
	}
	size, ok := f.sizes[path]
	if !ok {
		return syscall.EACCES
	}
	*st = unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: size / 4096, Bfree: size / 8192, Bavail: size / 8192, Files: 1000, Ffree: 900}
	return nil
}

func TestDisksCollector(t *testing.T) {
	fake := &fakeStatfs{
		sizes:   map[string]uint64{"/": 1 << 30, "/boot": 1 << 29, "/boot/efi": 1 << 20, "/srv/data files": 1 << 40, "/mnt/backups": 1 << 40},
		hang:    map[string]bool{"/mnt/backups": true},
		release: make(chan struct{}),
	}
	c := newDisksCollector(Config{ProcRoot: "testdata/proc", RootFS: "/"}, nil).(*disksCollector)
	c.statfs = fake.statfs
	c.timeout = 100 * time.Millisecond
	delete(fake.sizes, "/boot/efi") // permission denied

	run := func() (*gridcityv1.StateUpdate, *notes) {
		t.Helper()
		var out gridcityv1.StateUpdate
		n := &notes{name: "disks"}
		if err := c.update(context.Background(), &out, n); err != nil {
			t.Fatalf("update: %v", err)
		}
		return &out, n
	}
	mountsOf := func(u *gridcityv1.StateUpdate) string {
		var ms []string
		for _, d := range u.GetDisks().GetItems() {
			ms = append(ms, d.GetMount())
		}
		return strings.Join(ms, ",")
	}
	gapsOf := func(n *notes) string {
		var gs []string
		for _, g := range n.gaps {
			gs = append(gs, g.GetCheck()+": "+g.GetReason())
		}
		return strings.Join(gs, "\n")
	}

	out, n := run()
	if got, want := mountsOf(out), "/,/boot,/srv/data files"; got != want {
		t.Errorf("got mounts %q; want %q", got, want)
	}
	if got := gapsOf(n); !strings.Contains(got, "disks:/boot/efi: statfs /boot/efi: permission denied") ||
		!strings.Contains(got, "disks:/mnt/backups: statfs /mnt/backups did not return within 100ms") {
		t.Errorf("got gaps %q; want /boot/efi denied and /mnt/backups timed out", got)
	}

	// A stuck mount is not tried again while its call hangs.
	_, n = run()
	if got := gapsOf(n); !strings.Contains(got, "disks:/mnt/backups: statfs /mnt/backups has been blocked since") {
		t.Errorf("got gaps %q; want /mnt/backups still blocked", got)
	}

	// Once the call returns, the mount is back.
	close(fake.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		_, stuck := c.stuck["/mnt/backups"]
		c.mu.Unlock()
		if !stuck || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	out, _ = run()
	if got, want := mountsOf(out), "/,/boot,/mnt/backups,/srv/data files"; got != want {
		t.Errorf("after release got mounts %q; want %q", got, want)
	}
}

func TestDisksCollectorNoMountTable(t *testing.T) {
	c := newDisksCollector(Config{ProcRoot: t.TempDir()}, nil)
	err := c.update(context.Background(), &gridcityv1.StateUpdate{}, &notes{name: "disks"})
	if err == nil || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "/1/mounts") {
		t.Errorf("got %v; want an error naming the missing mounts file", err)
	}
}
