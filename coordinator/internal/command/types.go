// Package command is the life of a command an AI asked to run: the request,
// a person's decision in the app, dispatch to the agent (only after the
// approval is committed), its output and end, and an audit row for every
// step, written before the next step proceeds.
package command

import (
	"errors"
	"time"
)

// Status of a request. The terminal ones are completed, denied, failed,
// timed_out and unknown.
type Status string

const (
	StatusPending    Status = "pending"    // waiting for a person
	StatusApproved   Status = "approved"   // approved; being dispatched
	StatusDispatched Status = "dispatched" // sent to the agent, not yet started
	StatusRunning    Status = "running"    // the agent started it
	StatusCompleted  Status = "completed"  // it exited (any exit code)
	StatusDenied     Status = "denied"     // a person said no, or nobody answered in time
	StatusFailed     Status = "failed"     // it could not be dispatched or started
	StatusTimedOut   Status = "timed_out"  // killed at its timeout
	StatusUnknown    Status = "unknown"    // its fate is unknown (agent gone mid-run); never retried
)

// Terminal reports whether nothing more will happen to a request.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusDenied, StatusFailed, StatusTimedOut, StatusUnknown:
		return true
	}
	return false
}

// Input declares a value the command reads on stdin, typed by the approver
// on the card (a token for --password-stdin, say).
type Input struct {
	Prompt string `json:"prompt"`
	Secret bool   `json:"secret"`
}

// Output is one stream of a finished command as returned to the AI: the
// first 8 KB and the last 24 KB, with the bytes left out between them.
type Output struct {
	Text    string `json:"text"`
	Omitted int64  `json:"omitted"`
}

// Request is a command request and everything that happened to it. It is
// stored as JSON and never holds a secret or a sudo password.
type Request struct {
	ID             string `json:"id"`
	Server         string `json:"server"`
	Command        string `json:"command"`
	Reason         string `json:"reason"`
	TimeoutSeconds int    `json:"timeoutSeconds"`
	Input          *Input `json:"input,omitempty"`
	Risky          bool   `json:"risky"`
	// Client is the MCP client's X-Agent-Client; Token the MCP token's name.
	Client string `json:"client"`
	Token  string `json:"token"`
	// RunAs is the user the agent runs commands as; Sudo is true when the
	// command uses sudo and RunAs is not root, so the card offers a sudo
	// password field.
	RunAs string `json:"runAs"`
	Sudo  bool   `json:"sudo"`
	// Runbook names the configured runbook(s) whose command this is,
	// exactly; "" for a command of the AI's own.
	Runbook string `json:"runbook,omitempty"`

	Status    Status    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`

	DecidedAt time.Time `json:"decidedAt,omitzero"`
	DecidedBy string    `json:"decidedBy,omitempty"` // approver name; "" when it expired
	Note      string    `json:"note,omitempty"`
	// InputGiven and SudoPasswordGiven record that the approver typed the
	// declared input and a sudo password; their values are never kept.
	InputGiven        bool `json:"inputGiven,omitempty"`
	SudoPasswordGiven bool `json:"sudoPasswordGiven,omitempty"`
	// Authenticator is the approval's, made with the unseal key (which
	// the store never holds) over what it approved (approvalMessage): a
	// request read back from the store is dispatched only if it verifies.
	Authenticator []byte `json:"authenticator,omitempty"`

	DispatchedAt time.Time `json:"dispatchedAt,omitzero"`
	StartedAt    time.Time `json:"startedAt,omitzero"`
	FinishedAt   time.Time `json:"finishedAt,omitzero"`
	ExitCode     *int      `json:"exitCode,omitempty"`
	Stdout       Output    `json:"stdout"`
	Stderr       Output    `json:"stderr"`
	DurationMs   int64     `json:"durationMs,omitempty"`
	// Detail says why a request failed, timed out or is unknown.
	Detail string `json:"detail,omitempty"`
}

// Approval is what a person gives when approving: an optional note, the
// declared input's value, and a sudo password. The last two reach the agent
// only; they are never stored, logged or returned.
type Approval struct {
	Note         string
	Input        []byte
	SudoPassword []byte
}

// EventKind says what happened to a request.
type EventKind string

const (
	EventCreated  EventKind = "created"  // a new request awaits a decision
	EventDecided  EventKind = "decided"  // approved, denied or expired
	EventUpdated  EventKind = "updated"  // dispatched or started
	EventFinished EventKind = "finished" // reached a terminal status
)

// Event is published to subscribers (the app's live list) on every change.
type Event struct {
	Kind    EventKind `json:"kind"`
	Request Request   `json:"request"`
}

// Errors callers match with errors.Is.
var (
	ErrNotFound      = errors.New("no such request")
	ErrDecided       = errors.New("request already decided")
	ErrInputRequired = errors.New("the request declares an input; type its value to approve")
	// ErrUnreachable is an approval refused because no live coordinator
	// holds the server's agent now; the request still waits.
	ErrUnreachable = errors.New("the agent cannot be reached now")
)

// Timing of the contract.
const (
	// Expiry: requests nobody answers are denied after this long.
	Expiry = 5 * time.Minute
	// RunWait is how long run_command waits in all before returning waiting.
	RunWait = 25 * time.Second
	// WaitAgain is how long wait_for_command waits, well under the 60 s
	// request timeout of common clients.
	WaitAgain = 45 * time.Second
	// HeadBytes and TailBytes bound each stream in a result.
	HeadBytes = 8 << 10
	TailBytes = 24 << 10
	// AuditBytes bounds each stream kept whole for the audit.
	AuditBytes = 1 << 20
)
