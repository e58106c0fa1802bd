package security

import (
	"reflect"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TestFindingsHoldUntilTheyChange: JudgeServer's findings at a time are
// what it finds at every later time up to the end it gives, and at that
// end (an end may come early: a runbook's advice names no time); so a
// caller that keeps them until then answers what judging anew would.
// Walked over two hours, a second at a time near each end, on the
// fixture's sources: open, ending, ended with advice counting minutes,
// blocked, and logged in after failures.
func TestFindingsHoldUntilTheyChange(t *testing.T) {
	servers, _, withRunbooks := fixture()
	// Without runbooks an ended attack's advice counts the minutes since.
	for _, o := range []Options{withRunbooks, DefaultOptions()} {
		for _, srv := range servers {
			at := now.Add(-20 * time.Minute)
			for at.Before(now.Add(2 * time.Hour)) {
				kept, until := JudgeServer(srv, at, o)
				if until.Before(at) {
					t.Fatalf("%s at %s: findings hold until %s, before they were made", srv.Name, at, until)
				}
				for _, later := range []time.Time{at.Add((until.Sub(at)) / 2), until} {
					if later.After(now.Add(3 * time.Hour)) {
						continue
					}
					if again, _ := JudgeServer(srv, later, o); !reflect.DeepEqual(kept, again) {
						t.Fatalf("%s: findings made at %s said to hold until %s differ at %s:\n%+v\n%+v", srv.Name, at, until, later, kept, again)
					}
				}
				if until.After(now.Add(3 * time.Hour)) {
					break // nothing changes with the time any more
				}
				at = until.Add(time.Nanosecond)
			}
		}
	}
}

// TestOpenAttacksHoldUntilTheyEnd is TestFindingsHoldUntilTheyChange for
// the open attacks a row of list_servers names.
func TestOpenAttacksHoldUntilTheyEnd(t *testing.T) {
	servers, _, o := fixture()
	st := servers[0].State
	if len(st.GetLogins().GetSources()) == 0 {
		t.Fatal("the fixture's first server has no login sources")
	}
	for at := now.Add(-20 * time.Minute); at.Before(now.Add(time.Hour)); {
		kept, until := OpenAttacks(servers[0].Name, st, at, o), OpenAttacksUntil(st, at, o)
		for _, later := range []time.Time{at.Add(until.Sub(at) / 2), until} {
			if later.After(now.Add(2*time.Hour)) || later.Before(at) {
				continue
			}
			if again := OpenAttacks(servers[0].Name, st, later, o); !reflect.DeepEqual(kept, again) {
				t.Fatalf("open attacks at %s said to hold until %s differ at %s:\n%+v\n%+v", at, until, later, kept, again)
			}
		}
		if until.After(now.Add(2 * time.Hour)) {
			break
		}
		at = until.Add(time.Nanosecond)
	}
	if got := OpenAttacksUntil(&gridcityv1.StateUpdate{}, now, o); got.Before(now.Add(time.Hour)) {
		t.Fatalf("a state without logins: open attacks hold until %s; want for good", got)
	}
}

// TestJudgeIsCollectedFindings: Judge is the collection of each server's
// findings, whatever order they come in.
func TestJudgeIsCollectedFindings(t *testing.T) {
	servers, res, o := fixture()
	want := Judge(servers, res, now, o)
	var found []Findings
	for i := len(servers) - 1; i >= 0; i-- {
		f, _ := JudgeServer(servers[i], now, o)
		found = append(found, f)
	}
	if got := Collect(found, res, now, o); !reflect.DeepEqual(got.Exposures, want.Exposures) || len(got.Attacks) != len(want.Attacks) || len(got.Gaps) != len(want.Gaps) {
		t.Fatalf("collected in reverse:\n%+v\nwant\n%+v", got, want)
	}
}
