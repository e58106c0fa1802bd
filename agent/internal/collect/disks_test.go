package collect

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestParseMounts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []mount
	}{
		{
			name: "fixture: pseudo, container and duplicate mounts left out",
			in:   mustRead(t, "testdata/proc/1/mounts"),
			want: []mount{
				{"/dev/mapper/ubuntu--vg-ubuntu--lv", "/", "ext4"},
				{"/dev/vda2", "/boot", "ext4"},
				{"/dev/vda1", "/boot/efi", "vfat"},
				{"10.0.0.20:/export/backups", "/mnt/backups", "nfs4"},
				{"/dev/vdb1", "/srv/data files", "xfs"},
			},
		},
		{
			name: "the shortest mount of a device wins whatever the order",
			in:   "/dev/sda1 /srv/a/b ext4 rw 0 0\n/dev/sda1 /srv ext4 rw 0 0\n/dev/sda1 /srv/c ext4 rw 0 0\n",
			want: []mount{{"/dev/sda1", "/srv", "ext4"}},
		},
		{
			name: "devices named none are told apart by mount point",
			in:   "none /a zfs rw 0 0\nnone /b zfs rw 0 0\n",
			want: []mount{{"none", "/a", "zfs"}, {"none", "/b", "zfs"}},
		},
		{
			name: "relative and short lines ignored",
			in:   "/dev/sda1 relative ext4 rw 0 0\n/dev/sda2 /x\n",
			want: []mount{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseMounts(linesOf([]byte(tt.in), maxMountLines))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestParseMountsBound(t *testing.T) {
	var b strings.Builder
	for i := range maxDisks + 50 {
		fmt.Fprintf(&b, "/dev/d%d /m%d ext4 rw 0 0\n", i, i)
	}
	if got := parseMounts(linesOf([]byte(b.String()), maxMountLines)); len(got) != maxDisks {
		t.Errorf("got %d mounts; want %d", len(got), maxDisks)
	}
}

func FuzzParseMounts(f *testing.F) {
	f.Add([]byte("/dev/vdb1 /srv/data\\040files xfs rw 0 0\nproc /proc proc rw 0 0\n"))
	f.Add([]byte("/dev/sda1 /a ext4 rw 0 0\n/dev/sda1 / ext4 rw 0 0\n\\777 /\\12 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := parseMounts(linesOf(data, maxMountLines))
		if len(got) > maxDisks {
			t.Fatalf("got %d mounts; want at most %d", len(got), maxDisks)
		}
		for _, m := range got {
			for _, s := range []string{m.device, m.point, m.fstype} {
				if len(s) > maxName || !utf8.ValidString(s) || !fitText(s) {
					t.Fatalf("field %q too long or not clean", s)
				}
			}
			if pseudoFS[m.fstype] || !strings.HasPrefix(m.point, "/") {
				t.Fatalf("mount %v should have been left out", m)
			}
		}
	})
}

func TestUnescapeMount(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/srv/data\\040files", "/srv/data files"},
		{"/a\\011b\\012c\\134d", "/a\tb\nc\\d"},
		{"/no/escape", "/no/escape"},
		{"/short\\04", "/short\\04"},
		{"/not\\08octal", "/not\\08octal"},
	}
	for _, tt := range tests {
		if got := string(unescapeMount([]byte(tt.in))); got != tt.want {
			t.Errorf("unescapeMount(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestDiskSection(t *testing.T) {
	m := mount{"/dev/vda1", "/", "ext4"}
	tests := []struct {
		name string
		st   fsStats
		want *gridcityv1.Disk
	}{
		{
			name: "reserved blocks count as used the way df counts them",
			st:   fsStats{total: 1000, free: 300, avail: 250, files: 100, filesFree: 75},
			want: &gridcityv1.Disk{Mount: "/", Device: "/dev/vda1", Filesystem: "ext4", TotalBytes: 1000, UsedBytes: 700, AvailableBytes: 250,
				UsedPercent: 73.68, InodesTotal: 100, InodesUsed: 25, InodesUsedPercent: 25},
		},
		{
			name: "no inode count (btrfs)",
			st:   fsStats{total: 1000, free: 1000, avail: 1000},
			want: &gridcityv1.Disk{Mount: "/", Device: "/dev/vda1", Filesystem: "ext4", TotalBytes: 1000, AvailableBytes: 1000},
		},
		{
			name: "free above total is clamped",
			st:   fsStats{total: 10, free: 20, avail: 20, files: 1, filesFree: 5},
			want: &gridcityv1.Disk{Mount: "/", Device: "/dev/vda1", Filesystem: "ext4", TotalBytes: 10, AvailableBytes: 10, InodesTotal: 1},
		},
	}
	for _, tt := range tests {
		if got := diskSection(m, tt.st); !proto.Equal(got, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}
