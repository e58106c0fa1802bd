package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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

// errChainBroken is what `audit verify` returns when a link fails, after
// printing which entry: the exit status is 1.
var errChainBroken = errors.New("the audit chain does not verify")

func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, `print {"ok", "entries", "lastHash", "firstFailure"} as one JSON object`)
	if err := parse(fs, args); err != nil {
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
	rep, err := store.VerifyAuditChain(ctx, chain)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if f := rep.FirstFailure; f != nil {
		fmt.Fprintf(stdout, "FAIL entry %d (request %s, step %s, at %s): %s\n", f.Seq, f.RequestID, f.Step, f.At, f.Reason)
		fmt.Fprintf(stdout, "%d entries before it verify\n", rep.Entries)
	} else {
		fmt.Fprintf(stdout, "ok: %d entries, every link holds\nlast hash %s\n", rep.Entries, rep.LastHash)
		fmt.Fprintln(stdout, "keep the last hash outside the database: a later verify must reach it, or the log was rewritten")
	}
	if !rep.OK {
		return fmt.Errorf("%w at entry %d", errChainBroken, rep.FirstFailure.Seq)
	}
	return nil
}
