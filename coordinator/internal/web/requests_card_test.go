package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/command"
)

// TestHistoryKeepsRunbookRiskyAndWhatWasTyped: the pending list and the
// history carry the runbook and the risky mark, and the history says that
// the approver typed the input and a sudo password, never their values.
func TestHistoryKeepsRunbookRiskyAndWhatWasTyped(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	const secret, sudoPW = "s3cr3t-token", "sudo-pa55"
	typed := e.submit(t, command.Submission{Server: "app-1", Command: "sudo systemctl restart postgresql", Runbook: "restart-postgres", Risky: true,
		Input: &command.Input{Prompt: "token", Secret: true}})
	plain := e.submit(t, command.Submission{Command: "uptime"})

	var pending []requestView
	if got := e.do(t, req{method: "GET", path: "/api/requests?status=pending", cookie: c}); got.code != 200 || json.Unmarshal([]byte(got.body), &pending) != nil || len(pending) != 2 {
		t.Fatalf("pending: %d %s", got.code, got.body)
	}
	byID := map[string]requestView{pending[0].ID: pending[0], pending[1].ID: pending[1]}
	if v := byID[typed.ID]; v.Runbook != "restart-postgres" || !v.Risky || byID[plain.ID].Runbook != "" {
		t.Fatalf("pending %+v; want the runbook and risky mark on the runbook's card only", pending)
	}

	if got := e.do(t, req{method: "POST", path: "/api/requests/" + typed.ID + "/approve", cookie: c, body: map[string]string{"input": secret, "sudoPassword": sudoPW}}); got.code != 200 {
		t.Fatalf("approve: %d %s", got.code, got.body)
	}
	if got := e.do(t, req{method: "POST", path: "/api/requests/" + plain.ID + "/approve", cookie: c, body: map[string]string{}}); got.code != 200 {
		t.Fatalf("approve: %d %s", got.code, got.body)
	}
	got := e.do(t, req{method: "GET", path: "/api/history", cookie: c})
	var hist []requestView
	if got.code != 200 || json.Unmarshal([]byte(got.body), &hist) != nil || len(hist) != 2 {
		t.Fatalf("history: %d %s", got.code, got.body)
	}
	byID = map[string]requestView{hist[0].ID: hist[0], hist[1].ID: hist[1]}
	if v := byID[typed.ID]; v.Runbook != "restart-postgres" || !v.Risky || !v.InputGiven || !v.SudoPasswordGiven {
		t.Errorf("history of the runbook: %+v; want runbook, risky, input and sudo password given", v)
	}
	if v := byID[plain.ID]; v.Runbook != "" || v.Risky || v.InputGiven || v.SudoPasswordGiven {
		t.Errorf("history of the plain command: %+v; want none of them", v)
	}
	for _, field := range []string{`"runbook":`, `"inputGiven":`, `"sudoPasswordGiven":`, `"risky":`} {
		if !strings.Contains(got.body, field) {
			t.Errorf("history JSON lacks %s", field)
		}
	}
	if strings.Contains(got.body, secret) || strings.Contains(got.body, sudoPW) {
		t.Error("the history shows a typed value")
	}
}
