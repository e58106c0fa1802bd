package command

import (
	"context"
	"strings"
	"testing"
)

// TestRequestRecordsRunbookAndWhatWasTyped: the request keeps the runbook
// it came from (in its record and its "requested" audit row) and that the
// approver typed the input and a sudo password, never their values.
func TestRequestRecordsRunbookAndWhatWasTyped(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{Server: "app-1", Command: "sudo systemctl restart postgresql", Runbook: "restart-postgres",
		Input: &Input{Prompt: "token", Secret: true}})
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{Input: []byte("tok-1"), SudoPassword: []byte("pw-1")}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.Get(ctx, r.ID)
	if got.Runbook != "restart-postgres" || !got.InputGiven || !got.SudoPasswordGiven {
		t.Fatalf("request %+v; want the runbook and both values marked as typed", got)
	}
	rec, _ := e.st.Request(ctx, r.ID)
	audit, _ := e.st.Audit(ctx, r.ID, 100)
	all := string(rec.Body)
	for _, a := range audit {
		all += string(a.Detail)
		if a.Step == "requested" && !strings.Contains(string(a.Detail), `"runbook":"restart-postgres"`) {
			t.Errorf("requested audit row %s does not name the runbook", a.Detail)
		}
	}
	if strings.Contains(all, "tok-1") || strings.Contains(all, "pw-1") {
		t.Fatal("a typed value reached the store")
	}

	// Approved without a sudo password, and an AI's own command.
	r = e.submit(t, Submission{Server: "app-1", Command: "sudo systemctl restart postgresql "})
	e.svc.Approve(ctx, r.ID, "alice", Approval{})
	if got, _ := e.svc.Get(ctx, r.ID); got.Runbook != "" || got.InputGiven || got.SudoPasswordGiven {
		t.Fatalf("request %+v; want no runbook and nothing typed", got)
	}
}
