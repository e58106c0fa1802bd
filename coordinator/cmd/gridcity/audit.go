package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
