package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Every field that decides what runs, where, as whom and on whose word
// changes the encoding an authenticator is made over, and no two
// requests whose fields differ encode alike (the fields are
// length-prefixed: moving a byte from one field to the next is a change).
func TestApprovalMessageBindsEveryField(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 0, 0, 123456789, time.UTC)
	base := Request{ID: "cmd_1", Server: "web-1", Command: "systemctl restart nginx", RunAs: "root", TimeoutSeconds: 30,
		Input: &Input{Prompt: "token", Secret: true}, DecidedBy: "alice", DecidedAt: at}
	h := store.Handoff{RequestID: "cmd_1", Replica: "b", Sealed: []byte("sealed")}
	changes := map[string]func(r *Request, h *store.Handoff){
		"id":              func(r *Request, _ *store.Handoff) { r.ID = "cmd_2" },
		"server":          func(r *Request, _ *store.Handoff) { r.Server = "web-2" },
		"command":         func(r *Request, _ *store.Handoff) { r.Command = "id" },
		"command's bytes": func(r *Request, _ *store.Handoff) { r.Command += " " },
		"run-as":          func(r *Request, _ *store.Handoff) { r.RunAs = "www-data" },
		"timeout":         func(r *Request, _ *store.Handoff) { r.TimeoutSeconds = 31 },
		"no input":        func(r *Request, _ *store.Handoff) { r.Input = nil },
		"input prompt":    func(r *Request, _ *store.Handoff) { r.Input = &Input{Prompt: "other", Secret: true} },
		"input secret":    func(r *Request, _ *store.Handoff) { r.Input = &Input{Prompt: "token"} },
		"approver":        func(r *Request, _ *store.Handoff) { r.DecidedBy = "mallory" },
		"decided at":      func(r *Request, _ *store.Handoff) { r.DecidedAt = at.Add(time.Nanosecond) },
		"a byte moved":    func(r *Request, _ *store.Handoff) { r.Server, r.Command = "web-1s", "ystemctl restart nginx" },
		"replica":         func(_ *Request, h *store.Handoff) { h.Replica = "c" },
		"sealed":          func(_ *Request, h *store.Handoff) { h.Sealed = []byte("sealee") },
	}
	wantApproval, wantHandoff := approvalMessage(base, nil), approvalMessage(base, &h)
	if bytes.Equal(wantApproval, wantHandoff) {
		t.Fatal("an approval and its hand-off encode alike")
	}
	for name, change := range changes {
		r, h2 := base, h
		r.Input = &Input{Prompt: base.Input.Prompt, Secret: base.Input.Secret}
		change(&r, &h2)
		if bytes.Equal(approvalMessage(r, &h2), wantHandoff) {
			t.Errorf("%s: the hand-off encodes as before", name)
		}
		if name != "replica" && name != "sealed" && bytes.Equal(approvalMessage(r, nil), wantApproval) {
			t.Errorf("%s: the approval encodes as before", name)
		}
	}
	// What is stored and read back (JSON) encodes as it was made.
	b, _ := json.Marshal(base)
	var back Request
	if err := json.Unmarshal(b, &back); err != nil || !bytes.Equal(approvalMessage(back, &h), wantHandoff) {
		t.Fatalf("read back from JSON, the request encodes otherwise (%v)", err)
	}
	// Fields that do not decide what runs are left out: the note, the
	// reason, the status.
	r := base
	r.Note, r.Reason, r.Status = "ok", "why", StatusDispatched
	if !bytes.Equal(approvalMessage(r, &h), wantHandoff) {
		t.Error("the note, reason or status changed the encoding")
	}
}

// An approval is stored with its authenticator, which verifies with the
// coordinator's unseal key and no other; the secret typed on the card is
// in neither.
func TestApprovalIsStoredWithItsAuthenticator(t *testing.T) {
	e := newEnv(t, "")
	e.svc.cfg.Unseal = testUnseal
	ctx := context.Background()
	r := e.submit(t, Submission{Command: "read t", Input: &Input{Prompt: "t", Secret: true}})
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{Input: []byte("hunter2")}); err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.Request(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stored Request
	if err := json.Unmarshal(rec.Body, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Authenticator) != 32 || !testUnseal.Verify(approvalPurpose, approvalMessage(stored, nil), stored.Authenticator) {
		t.Fatalf("stored authenticator %x does not verify", stored.Authenticator)
	}
	if bytes.Contains(rec.Body, []byte("hunter2")) {
		t.Fatal("the secret is in the stored request")
	}
	// Offline, as `gridcity audit verify` checks it.
	other, err := sealing.KeyFromBytes(bytes.Repeat([]byte{8}, sealing.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(rec.Body, []byte(`"read t"`), []byte(`"read u"`), 1)
	noAuth := stored
	noAuth.Authenticator = nil
	none, _ := json.Marshal(noAuth)
	for _, tc := range []struct {
		name string
		key  *sealing.Key
		body []byte
		want error
	}{
		{"as stored", testUnseal, rec.Body, nil},
		{"another key", other, rec.Body, errUnauthenticated},
		{"command changed", testUnseal, changed, errUnauthenticated},
		{"no authenticator", testUnseal, none, ErrNoAuthenticator},
	} {
		if err := VerifyApproval(tc.key, tc.body); !errors.Is(err, tc.want) {
			t.Errorf("VerifyApproval (%s) = %v; want %v", tc.name, err, tc.want)
		}
	}
}
