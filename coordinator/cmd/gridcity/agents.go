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

func cmdAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agents", stderr)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "list: print JSON")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case len(pos) == 1 && pos[0] == "list":
		as, err := st.Agents(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			type row struct {
				Name       string `json:"name"`
				EnrolledAt string `json:"enrolledAt"`
				RevokedAt  string `json:"revokedAt,omitempty"`
			}
			rows := []row{}
			for _, a := range as {
				rows = append(rows, row{a.Name, rfc3339(a.EnrolledAt), rfc3339(a.RevokedAt)})
			}
			return json.NewEncoder(stdout).Encode(rows)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tENROLLED\tCERTIFICATE")
		for _, a := range as {
			state := "valid"
			if a.Revoked() {
				state = "revoked " + a.RevokedAt.Local().Format("2006-01-02 15:04")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Name, a.EnrolledAt.Local().Format("2006-01-02 15:04"), state)
		}
		return tw.Flush()
	case len(pos) == 2 && pos[0] == "revoke":
		err := st.RevokeAgent(ctx, pos[1], time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no enrolled agent named %q with a valid certificate; `gridcity agents list` shows them", pos[1])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Agent %q revoked: its next connection is refused. It can rejoin only with a new join line.\n", pos[1])
		return nil
	}
	return fmt.Errorf("agents %s: say list or revoke NAME", strings.TrimSpace(strings.Join(pos, " ")))
}
