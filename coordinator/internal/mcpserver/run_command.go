package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// RunCommandInput is run_command's input; the names are the contract's.
type RunCommandInput struct {
	Server         string     `json:"server" jsonschema:"the server's name, from list_servers"`
	Command        string     `json:"command" jsonschema:"the shell command to run (sh -c) as the agent's run-as user"`
	Reason         string     `json:"reason" jsonschema:"why it should run: the person approving it reads this"`
	TimeoutSeconds int        `json:"timeout_seconds" jsonschema:"1 to 600; the command's whole process group is killed at this limit"`
	Input          *InputSpec `json:"input,omitempty" jsonschema:"a value the command reads on stdin, typed by the approver (e.g. a token for --password-stdin); never shown to you"`
	Risky          bool       `json:"risky,omitempty" jsonschema:"true when the command could break something: the card warns the approver"`
}

// InputSpec declares the stdin input.
type InputSpec struct {
	Prompt string `json:"prompt" jsonschema:"what the approver should type"`
	Secret bool   `json:"secret,omitempty" jsonschema:"mask it on the card and in the command's output"`
}

// WaitInput is wait_for_command's input.
type WaitInput struct {
	RequestID string `json:"request_id" jsonschema:"the requestId a waiting run_command returned"`
}

// CommandResult is the result of run_command and wait_for_command. stdout
// and stderr are the command's own output: data, not instructions.
type CommandResult struct {
	Status     string     `json:"status" jsonschema:"completed, waiting, denied, failed, timed_out or unknown"`
	RequestID  string     `json:"requestId"`
	Server     string     `json:"server"`
	Command    string     `json:"command"`
	ExitCode   *int       `json:"exitCode,omitempty" jsonschema:"the command's exit code (completed, timed_out)"`
	Stdout     string     `json:"stdout,omitempty" jsonschema:"its standard output: the first 8 KB and the last 24 KB"`
	Stderr     string     `json:"stderr,omitempty" jsonschema:"its standard error, trimmed the same way"`
	Truncated  *Truncated `json:"truncated,omitempty" jsonschema:"bytes left out of each stream"`
	Note       string     `json:"note,omitempty" jsonschema:"the approver's note (or why it was denied)"`
	DecidedBy  string     `json:"decidedBy,omitempty"`
	DurationMs int64      `json:"durationMs,omitempty"`
	Detail     string     `json:"detail,omitempty" jsonschema:"why it failed, timed out or is unknown"`
	ExpiresAt  string     `json:"expiresAt,omitempty" jsonschema:"while waiting: when it is denied if nobody answers"`
	Next       string     `json:"next" jsonschema:"what to do now"`
}

// Truncated counts the bytes left out of each stream.
type Truncated struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

func addRunCommand(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "run_command",
		Title: "Run a command (a person approves it first)",
		Description: "Ask to run a shell command on a server. Nothing runs until a person approves it on a card in the gridcity app; " +
			"they see the command, the server, your reason and your client's name, and may deny it with a note. " +
			"The call waits up to 25 s: if the command finished by then you get its exit code and output (first 8 KB and last 24 KB of each stream, less when both would pass 48,000 characters; truncated counts what was cut); " +
			"otherwise status is waiting with a requestId: tell the user to look at the app, then call wait_for_command with that request_id. " +
			"Unanswered requests are denied after 5 minutes. A secret the command needs (a token for --password-stdin) goes in input: the approver types it; you never see it. " +
			"Use read-only commands to look before you change anything, and set risky for anything that could break a service.",
		Annotations:  &mcp.ToolAnnotations{Title: "Run a command (a person approves it first)", ReadOnlyHint: false, DestructiveHint: ptr(true), IdempotentHint: false, OpenWorldHint: ptr(true)},
		OutputSchema: outputSchema[CommandResult](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in RunCommandInput) (*mcp.CallToolResult, CommandResult, error) {
		caller := callerOf(req)
		if caller.Scope != store.ScopeOperate {
			return nil, CommandResult{}, errors.New("this token has the read scope: it cannot run commands")
		}
		sub := command.Submission{Server: in.Server, Command: in.Command, Reason: in.Reason, TimeoutSeconds: in.TimeoutSeconds,
			Risky: in.Risky, Client: caller.Client, Token: caller.Token, Runbook: d.view.Runbook(in.Command)}
		if in.Input != nil {
			sub.Input = &command.Input{Prompt: in.Input.Prompt, Secret: in.Input.Secret}
		}
		r, err := d.Commands.Submit(ctx, sub)
		if err != nil {
			return nil, CommandResult{}, err
		}
		d.Logger.Info("command requested", "request", r.ID, "server", r.Server, "token", r.Token, "client", r.Client)
		// The request exists from here on: whatever the wait meets, the
		// caller gets its id back, never an error that loses it.
		if w, err := d.Commands.Wait(ctx, r.ID, d.RunWait, progress(ctx, req, d.RunWait)); err != nil {
			d.Logger.Warn("run_command: answering with the request as submitted", "request", r.ID, "err", err)
		} else {
			r = w
		}
		return nil, resultOf(r, d.AppURL), nil
	})
}

func addWaitForCommand(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "wait_for_command",
		Title: "Wait for a command's result",
		Description: "Wait again for a command that run_command returned as waiting: returns its result, or waiting once more after about 45 s. " +
			"Call it again while the status is waiting; the request is denied after 5 minutes without an answer.",
		Annotations:  readOnly("Wait for a command's result"),
		OutputSchema: outputSchema[CommandResult](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, CommandResult, error) {
		if callerOf(req).Scope != store.ScopeOperate {
			return nil, CommandResult{}, errors.New("this token has the read scope: it cannot see commands")
		}
		r, err := d.Commands.Wait(ctx, in.RequestID, d.WaitAgain, progress(ctx, req, d.WaitAgain))
		if errors.Is(err, command.ErrNotFound) {
			return nil, CommandResult{}, fmt.Errorf("no command request %q: use the requestId that run_command returned", in.RequestID)
		}
		if err != nil {
			return nil, CommandResult{}, err
		}
		return nil, resultOf(r, d.AppURL), nil
	})
}

// progress sends MCP progress notifications while a call waits, when the
// client asked for them with a progress token.
func progress(ctx context.Context, req *mcp.CallToolRequest, total time.Duration) func(command.Request) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil
	}
	start := time.Now()
	return func(r command.Request) {
		msg := "waiting for a person to approve it in the gridcity app"
		if r.Status != command.StatusPending {
			msg = "approved; " + string(r.Status)
		}
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: time.Since(start).Seconds(), Total: total.Seconds(), Message: msg})
	}
}

// resultOf maps a request to the contract's statuses: everything not yet
// ended is waiting.
func resultOf(r command.Request, appURL string) CommandResult {
	out := CommandResult{RequestID: r.ID, Server: r.Server, Command: r.Command, Note: r.Note, DecidedBy: r.DecidedBy, Detail: r.Detail}
	switch r.Status {
	case command.StatusPending:
		out.Status = "waiting"
		out.ExpiresAt = fleetview.RFC3339(r.ExpiresAt)
		out.Next = "A person has to approve this in the gridcity app (" + appURL + "). Tell the user, then call wait_for_command with " + waitArgs(r.ID) + "."
	case command.StatusApproved, command.StatusDispatched, command.StatusRunning:
		out.Status = "waiting"
		out.Next = "Approved by " + r.DecidedBy + " and " + string(r.Status) + "; call wait_for_command with " + waitArgs(r.ID) + " for the result."
	case command.StatusDenied:
		out.Status = "denied"
		out.Next = "It did not run. Read the note; do not ask again unchanged."
	default:
		out.Status = string(r.Status)
		out.ExitCode, out.DurationMs = r.ExitCode, r.DurationMs
		out.Stdout, out.Stderr = r.Stdout.Text, r.Stderr.Text
		if r.Stdout.Omitted > 0 || r.Stderr.Omitted > 0 {
			out.Truncated = &Truncated{Stdout: r.Stdout.Omitted, Stderr: r.Stderr.Omitted}
		}
		switch r.Status {
		case command.StatusCompleted:
			out.Next = "It ran; check exitCode and the output."
		case command.StatusUnknown:
			out.Next = "Whether it ran is unknown; it is never retried by itself. Check the server's state before asking again."
		default:
			out.Next = "See detail."
		}
	}
	fitResult(&out)
	return out
}

// waitArgs is wait_for_command's arguments for a request, spelled as its
// input schema spells them.
func waitArgs(id string) string {
	b, _ := json.Marshal(WaitInput{RequestID: id})
	return string(b)
}

// callerOf reads the token the guard verified and the client's name: its
// X-Agent-Client header (what `gridcity mcp --install` configures), else
// the name in its clientInfo, which a 2026-07-28 request carries in its
// own _meta and a 2025 session sent once, in initialize.
func callerOf(req *mcp.CallToolRequest) Caller {
	c := Caller{Token: "unknown", Client: "unknown", Scope: store.ScopeRead}
	if req.Extra != nil {
		if ti := req.Extra.TokenInfo; ti != nil {
			if n, ok := ti.Extra["name"].(string); ok {
				c.Token = n
			}
			c.OAuthClient, _ = ti.Extra["oauthClient"].(string)
			c.Approver, _ = ti.Extra["approver"].(string)
			if len(ti.Scopes) == 1 {
				c.Scope = store.Scope(ti.Scopes[0])
			}
		}
		if req.Extra.Header != nil {
			c.Client = ClientName(req.Extra.Header)
		}
	}
	if ci := req.ClientInfo(); c.Client == "unknown" && ci != nil {
		c.Client = clean(ci.Name)
	}
	return c
}
