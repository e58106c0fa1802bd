package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return cmdAuditVerify(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("audit", stderr)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	request := fs.String("request", "", "only this request id")
	limit := fs.Int("limit", 100000, "at most this many rows")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.Audit(ctx, *request, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		for _, r := range rows {
			if err := enc.Encode(map[string]any{"seq": r.Seq, "at": r.At.Format(time.RFC3339Nano), "requestId": r.RequestID,
				"step": r.Step, "actor": r.Actor, "detail": json.RawMessage(r.Detail)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tREQUEST\tSTEP\tACTOR\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.At.Local().Format("2006-01-02 15:04:05"), r.RequestID, r.Step, r.Actor, oneLine(string(r.Detail), 120))
	}
	return tw.Flush()
}

// oneLine keeps a table row on one line; --json has everything.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "{}" {
		return ""
	}
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return s
}

// errChainBroken is what `audit verify` returns when an entry fails,
// after printing which: the exit status is 1.
var errChainBroken = errors.New("the audit chain does not verify")

// verifyReport is what `audit verify --json` prints.
type verifyReport struct {
	store.ChainReport
	// Authenticators says whether the approvals' authenticators were
	// checked, and how many.
	Authenticators approvalCheck `json:"authenticators"`
}

type approvalCheck struct {
	Checked bool `json:"checked"`
	// Why they were not checked.
	Reason   string `json:"reason,omitempty"`
	Verified int    `json:"verified"`
	// WithoutAuthenticator: approvals decided before approvals carried
	// one; NotStored: approvals whose request is no longer in the store.
	WithoutAuthenticator int `json:"withoutAuthenticator"`
	NotStored            int `json:"notStored"`
}

func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, `print {"ok", "entries", "lastHash", "firstFailure", "authenticators"} as one JSON object`)
	keyFile := fs.String("unseal-key-file", "", "the unseal key, to check every approval's authenticator too (default: DATA/unseal.key when it exists)")
	if err := parse(fs, args); err != nil {
		return err
	}
	key, why, err := auditUnsealKey(*keyFile, *sf.data)
	if err != nil {
		return err
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	chain, ok := st.(store.AuditChainReader)
	if !ok {
		return fmt.Errorf("the store %s cannot read the audit chain", sf.where())
	}
	rep := verifyReport{Authenticators: approvalCheck{Checked: key != nil, Reason: why}}
	var check func(store.ChainedAudit) (string, error)
	if key != nil {
		check = func(c store.ChainedAudit) (string, error) {
			if c.Step != "approved" {
				return "", nil
			}
			return checkApproval(ctx, st, key, c.RequestID, &rep.Authenticators)
		}
	}
	if rep.ChainReport, err = store.VerifyAuditChain(ctx, chain, check); err != nil {
		return err
	}
	if err := printVerify(stdout, rep, *asJSON); err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("%w at entry %d", errChainBroken, rep.FirstFailure.Seq)
	}
	return nil
}

// auditUnsealKey is the key of --unseal-key-file, else DATA/unseal.key if
// there is one; without either, nil and why.
func auditUnsealKey(file, data string) (*sealing.Key, string, error) {
	if file != "" {
		k, err := sealing.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("--unseal-key-file (GRIDCITY_UNSEAL_KEY_FILE): %w", err)
		}
		return k, "", nil
	}
	path := filepath.Join(data, sealing.FileName)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "no unseal key: give --unseal-key-file FILE to check them", nil
	}
	k, err := sealing.ReadFile(path)
	return k, "", err
}

// checkApproval checks the authenticator of request id's approval, as
// the store keeps the request now.
func checkApproval(ctx context.Context, st store.Store, key *sealing.Key, id string, n *approvalCheck) (string, error) {
	r, err := st.Request(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		n.NotStored++
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read request %s: %w", id, err)
	}
	switch err := command.VerifyApproval(key, r.Body); {
	case errors.Is(err, command.ErrNoAuthenticator):
		n.WithoutAuthenticator++
	case err != nil:
		return "authenticator mismatch: " + err.Error(), nil
	default:
		n.Verified++
	}
	return "", nil
}

func printVerify(w io.Writer, rep verifyReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	if f := rep.FirstFailure; f != nil {
		fmt.Fprintf(w, "FAIL entry %d (request %s, step %s, at %s): %s\n", f.Seq, f.RequestID, f.Step, f.At, f.Reason)
		fmt.Fprintf(w, "%d entries before it verify\n", rep.Entries)
		return nil
	}
	fmt.Fprintf(w, "ok: %d entries, every link holds\nlast hash %s\n", rep.Entries, rep.LastHash)
	if a := rep.Authenticators; a.Checked {
		fmt.Fprintf(w, "approvals' authenticators: %d verify, %d without one (decided before approvals carried them), %d no longer stored\n", a.Verified, a.WithoutAuthenticator, a.NotStored)
	} else {
		fmt.Fprintf(w, "approvals' authenticators not checked: %s\n", a.Reason)
	}
	_, err := fmt.Fprintln(w, "keep the last hash outside the database: a later verify must reach it, or the log was rewritten")
	return err
}
