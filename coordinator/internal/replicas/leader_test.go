package replicas

import (
	"testing"
	"time"
)

// TestLeaderTellsChanges: a new leader does not lead until the election
// says so; each change closes the channel its watchers hold, and a
// repeated Set changes nothing.
func TestLeaderTellsChanges(t *testing.T) {
	l := NewLeader(nil)
	if l.Leads() {
		t.Fatal("a new leader leads before any election")
	}
	changed := l.Changed()
	l.Set(true)
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("becoming the leader did not close the watched channel")
	}
	if !l.Leads() {
		t.Fatal("Set(true) did not make it lead")
	}
	again := l.Changed()
	l.Set(true)
	select {
	case <-again:
		t.Fatal("Set(true) while leading was told as a change")
	default:
	}
	l.Set(false)
	select {
	case <-again:
	case <-time.After(time.Second):
		t.Fatal("stepping down did not close the watched channel")
	}
	if l.Leads() {
		t.Fatal("Set(false) left it leading")
	}
}
