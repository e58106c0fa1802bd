//go:build unix

package link

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/agent/internal/cmdjournal"
	"github.com/gridcity/gridcity/agent/internal/runner"
)

// The hello's journal reports every step a command took, with its time,
// before its present state: the coordinator audits the ones it missed.
func TestJournalReportsEachStepWithItsTime(t *testing.T) {
	j, err := cmdjournal.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	before := time.Now().UnixMilli()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.Accept("ran"))
	must(j.Started("ran", 4242))
	must(j.Finished("ran", runner.Result{ExitCode: 0, StdoutTotal: 3}, []byte("ok\n"), nil))
	must(j.Accept("running"))
	must(j.Started("running", 4243))
	must(j.Accept("queued"))
	must(j.Accept("nostart"))
	must(j.Finished("nostart", runner.Result{ExitCode: -1, Err: fmt.Errorf("user nobody2 unknown")}, nil, nil))
	after := time.Now().UnixMilli()

	got := map[string][]string{}
	for _, ev := range NewCommands(j, "root", "", slog.New(slog.DiscardHandler)).Journal() {
		if ev.GetAtUnixMs() < before || ev.GetAtUnixMs() > after {
			t.Errorf("%s %s at %d; want its time, between %d and %d", ev.GetRequestId(), ev.GetKind(), ev.GetAtUnixMs(), before, after)
		}
		got[ev.GetRequestId()] = append(got[ev.GetRequestId()], strings.TrimPrefix(ev.GetKind().String(), "KIND_"))
		if ev.GetKind() == gridcityv1.CommandEvent_KIND_EXITED && ev.GetRequestId() == "ran" && string(ev.GetStdoutKept()) != "ok\n" {
			t.Errorf("ran: kept %q; want its output", ev.GetStdoutKept())
		}
	}
	for id, want := range map[string]string{
		"ran":     "ACCEPTED,STARTED,EXITED",
		"running": "ACCEPTED,STARTED",
		"queued":  "ACCEPTED",
		"nostart": "ACCEPTED,EXITED",
	} {
		if s := strings.Join(got[id], ","); s != want {
			t.Errorf("%s: %s; want %s", id, s, want)
		}
	}
}
