package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

const localTokenFile = "mcp-token"

func cmdToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token", stderr)
	sf := addStoreFlags(fs)
	scope := fs.String("scope", "operate", "read (read-only tools), operate (every tool) or metrics (scrapes /metrics and /metrics/fleet, no MCP)")
	asJSON := fs.Bool("json", false, `print JSON: {"name","scope","token"} for create, an array for list`)
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("token: say create NAME, list or revoke NAME")
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case pos[0] == "create" && len(pos) == 2:
		sc := store.Scope(*scope)
		if !sc.MCP() && sc != store.ScopeMetrics {
			return fmt.Errorf("--scope %q: use read, operate or metrics", *scope)
		}
		tok, err := createToken(ctx, st, pos[1], sc)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(map[string]string{"name": pos[1], "scope": string(sc), "token": tok})
		}
		if sc == store.ScopeMetrics {
			fmt.Fprintf(stdout, "Token %q (%s), shown once — put it in a file Prometheus reads (a scrape job's authorization: credentials_file):\n\n  %s\n", pos[1], sc, tok)
			return nil
		}
		fmt.Fprintf(stdout, "Token %q (%s), shown once — keep it in your AI client's config:\n\n  %s\n", pos[1], sc, tok)
		return nil
	case pos[0] == "list" && len(pos) == 1:
		rows, err := tokenRows(ctx, st, time.Now())
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(rows)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tSTATE")
		for _, t := range rows {
			state := "active"
			if t.RevokedAt != "" {
				state = "revoked " + t.revoked.Local().Format("2006-01-02 15:04")
			}
			name := t.Name
			if t.Kind == "oauth" {
				by := "no live token"
				if len(t.Approvers) > 0 {
					by = "granted by " + strings.Join(t.Approvers, ", ")
				}
				name = fmt.Sprintf("%s (OAuth %s, %s)", t.Name, t.ClientID, by)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, t.Scope, t.created.Local().Format("2006-01-02 15:04"), state)
		}
		return tw.Flush()
	case pos[0] == "revoke" && len(pos) == 2:
		return revokeToken(ctx, st, pos[1], stdout)
	}
	return fmt.Errorf("token %s: say create NAME, list or revoke NAME", strings.TrimSpace(strings.Join(pos, " ")))
}

// tokenRow is a static token or an OAuth client in `token list`.
type tokenRow struct {
	Kind      string `json:"kind"` // static or oauth
	Name      string `json:"name"`
	Scope     string `json:"scope"`
	CreatedAt string `json:"createdAt"`
	RevokedAt string `json:"revokedAt,omitempty"`
	// An OAuth client's id, how it registered (dcr or cimd), and who
	// granted its live tokens.
	ClientID     string   `json:"clientId,omitempty"`
	Registration string   `json:"registration,omitempty"`
	Approvers    []string `json:"approvers,omitempty"`

	created, revoked time.Time
}

// tokenRows lists the static tokens, then the OAuth clients with the
// widest scope of their live tokens (none when they hold none).
func tokenRows(ctx context.Context, st store.Store, now time.Time) ([]tokenRow, error) {
	ts, err := st.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	rows := []tokenRow{}
	for _, t := range ts {
		rows = append(rows, tokenRow{Kind: "static", Name: t.Name, Scope: string(t.Scope), CreatedAt: rfc3339(t.CreatedAt), RevokedAt: rfc3339(t.RevokedAt), created: t.CreatedAt, revoked: t.RevokedAt})
	}
	cs, err := oauth.Clients(ctx, st, now)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		rows = append(rows, tokenRow{Kind: "oauth", Name: c.Name, Scope: c.Scope, CreatedAt: rfc3339(c.CreatedAt), RevokedAt: rfc3339(c.RemovedAt), ClientID: c.ID, Registration: c.Registration,
			Approvers: c.Approvers, created: c.CreatedAt, revoked: c.RemovedAt})
	}
	return rows, nil
}

// revokeToken revokes the static token named name or, when there is
// none, the OAuth clients with that id or name: their tokens are revoked
// and they must register again.
func revokeToken(ctx context.Context, st store.Store, name string, stdout io.Writer) error {
	err := st.RevokeToken(ctx, name, time.Now())
	if err == nil {
		fmt.Fprintf(stdout, "Token %q revoked; clients using it now get 401.\n", name)
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	cs, err := st.OAuthClients(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, c := range cs {
		if c.Removed() || c.ID != name && c.Name != name {
			continue
		}
		if err := oauth.Remove(ctx, st, c.ID, time.Now()); err != nil {
			return err
		}
		n++
		fmt.Fprintf(stdout, "OAuth client %q (%s) removed and its tokens revoked; it now gets 401 and must sign in again.\n", c.Name, c.ID)
	}
	if n == 0 {
		return fmt.Errorf("no active token or OAuth client named %q; `gridcity token list` shows them", name)
	}
	return nil
}

func createToken(ctx context.Context, st store.Store, name string, scope store.Scope) (string, error) {
	if name == "" || len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("token name %q: use 1–64 printable characters without spaces", name)
	}
	tok, err := randomToken()
	if err != nil {
		return "", err
	}
	tok = "gc_" + tok
	err = st.CreateToken(ctx, store.Token{Name: name, Scope: scope, Hash: bearer.Hash(tok), CreatedAt: time.Now()})
	if errors.Is(err, store.ErrExists) {
		return "", fmt.Errorf("a token named %q exists; revoke it first or choose another name", name)
	}
	return tok, err
}

// ensureLocalToken returns the token in DATA/mcp-token, creating the token
// "local" (operate scope) when the file is missing or its token was revoked.
// The file is the operator's credential, like a kubeconfig: mode 0600, and
// the store keeps only its hash.
func ensureLocalToken(ctx context.Context, st store.Store, data string) (string, bool, error) {
	path := filepath.Join(data, localTokenFile)
	if b, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(b))
		if _, err := st.TokenByHash(ctx, bearer.Hash(tok)); err == nil {
			return tok, false, nil
		}
	}
	name := "local"
	for i := 2; ; i++ {
		tok, err := createToken(ctx, st, name, store.ScopeOperate)
		if err == nil {
			return tok, true, atomicfile.Write(data, localTokenFile, []byte(tok+"\n"))
		}
		if !strings.Contains(err.Error(), "exists") || i > 100 {
			return "", false, err
		}
		name = fmt.Sprintf("local-%d", i)
	}
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
