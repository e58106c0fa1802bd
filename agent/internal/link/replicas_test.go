package link

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TestCoordinatorsKeptAndTriedInTurn: the list a coordinator sends is kept
// in the state directory (0600) and read back by the next start; the
// enrollment address stays first, the others follow in this agent's turn
// and wrap round; a list an agent cannot dial is refused and the kept one stays.
func TestCoordinatorsKeptAndTriedInTurn(t *testing.T) {
	dir := t.TempDir()
	c, err := loadCoordinators(dir, "a.example:4601", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.after("a.example:4601"); got != "a.example:4601" {
		t.Fatalf("with no other coordinator known, after a comes %s; want a again", got)
	}
	changed, err := c.set(&gridcityv1.Replicas{GrpcAddresses: []string{"b.example:4601", "a.example:4601", "c.example:4601"}})
	if err != nil || !changed {
		t.Fatalf("set = %v, %v; want changed", changed, err)
	}
	if changed, err := c.set(&gridcityv1.Replicas{GrpcAddresses: []string{"b.example:4601", "a.example:4601", "c.example:4601"}}); err != nil || changed {
		t.Fatalf("the same list again: set = %v, %v; want unchanged", changed, err)
	}
	// web-1's own turn (the shared rule is tested with ReplicaOrder).
	want := gridcityv1.ReplicaOrder("a.example:4601", []string{"b.example:4601", "c.example:4601"}, "web-1")
	if got := c.order(); !slices.Equal(got, want) || got[0] != "a.example:4601" || len(got) != 3 {
		t.Fatalf("order %v; want %v (the enrollment address first, each once)", got, want)
	}
	for from, to := range map[string]string{want[0]: want[1], want[1]: want[2], want[2]: want[0], "gone.example:4601": want[0]} {
		if got := c.after(from); got != to {
			t.Errorf("after %s comes %s; want %s", from, got, to)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, coordinatorsFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o; want 0600", coordinatorsFile, fi.Mode().Perm())
	}

	if _, err := c.set(&gridcityv1.Replicas{GrpcAddresses: []string{"b.example:4601", "0.0.0.0:4601"}}); err == nil {
		t.Fatal("a list with an address that names no machine was kept; want it refused")
	}
	again, err := loadCoordinators(dir, "a.example:4601", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := again.order(); !slices.Equal(got, want) {
		t.Fatalf("after a restart the order is %v; want %v", got, want)
	}

	// A damaged file: an error saying so, and the enrollment address alone.
	if err := os.WriteFile(filepath.Join(dir, coordinatorsFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged, err := loadCoordinators(dir, "a.example:4601", "web-1")
	if err == nil {
		t.Fatal("a damaged list was read without an error")
	}
	if got := damaged.order(); !slices.Equal(got, []string{"a.example:4601"}) {
		t.Fatalf("with a damaged list the order is %v; want the enrollment address alone", got)
	}
}
