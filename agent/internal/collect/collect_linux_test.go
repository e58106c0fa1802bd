package collect

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestCollectConcurrent(t *testing.T) {
	s := New(fixtureConfig(), nil)
	useFixtureFirewall(s)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				s.Collect(context.Background(), TierFast, TierMedium)
			}
		})
	}
	wg.Wait()
}

// TestGolden runs the fast and medium tiers over the fixture tree and
// compares the whole update with testdata/golden/fixture.json. Run with
// -update to rewrite it after a deliberate change.
func TestGolden(t *testing.T) {
	skipBigEndian(t)
	s := New(fixtureConfig(), nil)
	useFixtureFirewall(s)
	for _, e := range s.entries {
		if d, ok := e.c.(*disksCollector); ok {
			fake := &fakeStatfs{
				sizes:   map[string]uint64{"testdata": 64 << 30, "testdata/boot": 1 << 30, "testdata/boot/efi": 512 << 20, "testdata/srv/data files": 2 << 40},
				hang:    map[string]bool{"testdata/mnt/backups": true},
				release: make(chan struct{}),
			}
			t.Cleanup(func() { close(fake.release) })
			d.statfs = fake.statfs
			d.timeout = 100 * time.Millisecond
		}
	}
	got := s.Collect(context.Background(), TierFast, TierMedium)
	got.CollectedUnixMs = 0

	const golden = "testdata/golden/fixture.json"
	if *update {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := &gridcityv1.StateUpdate{}
	if err := protojson.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		gb, _ := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got)
		t.Errorf("got\n%s\nwant the contents of %s (run go test -update after a deliberate change)", gb, golden)
	}
}
