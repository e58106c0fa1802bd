package collect

import (
	"context"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestHostCollectorFixture(t *testing.T) {
	c := newHostCollector(fixtureConfig(), nil)
	var out gridcityv1.StateUpdate
	if err := c.update(context.Background(), &out, &notes{name: "host"}); err != nil {
		t.Fatal(err)
	}
	// Hostname, kernel, arch and virtualization come from the running
	// kernel, not the tree; only what the fixture decides is checked.
	h := out.GetHost()
	got := [4]any{h.GetOs(), h.GetOsVersion(), h.GetPlatformFamily(), h.GetBootUnix()}
	want := [4]any{"debian", "12.7", "debian", int64(1733140800)}
	if got != want {
		t.Errorf("got os, version, family, boot %v; want %v", got, want)
	}
}
