// Package clientinstall writes gridcity's entry into AI clients' settings
// files (`gridcity mcp --install`), each with a token of its own named after
// the client, and shows what it would change (--print).
package clientinstall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/clients"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

// Options is what `gridcity mcp --install [CLIENT …]` was asked.
type Options struct {
	IDs   []string    // the clients named; none means every client
	Scope store.Scope // "" keeps a reused token's scope, and makes new ones operate
	Print bool        // --print: say what would be written, write nothing, mint nothing
}

// Store is what the installer reads and changes of the tokens.
type Store interface {
	TokenByHash(ctx context.Context, hash []byte) (store.Token, error)
	Tokens(ctx context.Context) ([]store.Token, error)
	RevokeToken(ctx context.Context, name string, at time.Time) error
}

// Installer writes the gridcity entry into AI clients' settings files, each
// with a token of its own named after the client, so that approval cards and
// the audit say which client asked and one can be revoked alone.
type Installer struct {
	Store Store
	// Mint creates a token of the name and scope and returns its secret.
	Mint     func(ctx context.Context, name string, scope store.Scope) (string, error)
	Host     clients.Host
	Endpoint string
	Command  string // this gridcity executable, for the stdio bridge
	Options
	Out    io.Writer
	Now    func() time.Time
	Exists func(path string) bool
	OnPath func(name string) bool

	wrote bool // some file was written
}

// Run sets up the clients named, or every one installed here.
func (in *Installer) Run(ctx context.Context) error {
	var list []clients.Client
	detect := len(in.IDs) == 0 // no client named: those installed here
	if detect {
		list = clients.All()
	}
	for _, id := range in.IDs {
		c, err := clients.Lookup(id)
		if err != nil {
			return err
		}
		list = append(list, c)
	}
	var failed, skipped []string
	for _, c := range list {
		if ok, why := c.Installed(in.Host, in.Exists, in.OnPath); !ok {
			if detect {
				fmt.Fprintf(in.Out, "%s: not installed here (%s), skipped\n", c.Name, why)
				skipped = append(skipped, c.ID)
				continue
			}
			// Named: its config is written all the same (its folder
			// created), ready for when it is installed or first run.
			fmt.Fprintf(in.Out, "%s: not detected here (%s); writing its config anyway, as it was named\n", c.Name, why)
		}
		if err := in.client(ctx, c); err != nil {
			fmt.Fprintf(in.Out, "%s: %v\n", c.Name, err)
			failed = append(failed, c.ID)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(in.Out, "\nSkipped the clients not found here; name one to write its config anyway, e.g. `gridcity mcp --install %s`.\n", skipped[0])
	}
	if in.wrote {
		fmt.Fprintln(in.Out, "\nRestart a client (or reload its MCP servers) to pick the change up. `gridcity token list` shows each client's token; `gridcity token revoke NAME` cuts that client off alone.")
	}
	if len(failed) > 0 {
		return fmt.Errorf("mcp --install: %s not set up (see above)", strings.Join(failed, ", "))
	}
	return nil
}

// client sets up one client, trying again when the client rewrote its file
// while gridcity was editing it (Claude Code rewrites ~/.claude.json often).
func (in *Installer) client(ctx context.Context, c clients.Client) error {
	for attempt := 0; ; attempt++ {
		err := in.clientOnce(ctx, c)
		if !errors.Is(err, errChangedMeanwhile) || attempt == 2 {
			return err
		}
	}
}

var errChangedMeanwhile = errors.New("the file changed while gridcity was editing it; close the client and run again")

func (in *Installer) clientOnce(ctx context.Context, c clients.Client) error {
	path := c.Path(in.Host)
	shown := in.Host.Tilde(path)
	// Edit the file a symlink points at (dotfile managers), not the link.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	text, err := os.ReadFile(path)
	var before os.FileInfo
	switch {
	case errors.Is(err, os.ErrNotExist):
		text = nil
	case err != nil:
		return fmt.Errorf("read %s: %w", shown, err)
	default:
		if before, err = os.Stat(path); err != nil {
			return err
		}
	}
	bad := func(err error) error {
		return fmt.Errorf("%s: %w; left untouched: fix the file (or move it aside) and run again", shown, err)
	}
	cur, err := c.CurrentToken(text)
	if err != nil {
		return bad(err)
	}

	// A token already in the entry is kept when it is live, this client's
	// (named after it) and of the scope asked for: running again mints nothing.
	kept, keptName := "", ""
	var replaced string // a live token of this client's that the new one replaces
	if cur != "" {
		t, err := in.Store.TokenByHash(ctx, bearer.Hash(cur))
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case !ownedBy(t.Name, c.ID):
		case in.Scope != "" && t.Scope != in.Scope:
			replaced = t.Name
		default:
			kept, keptName = cur, t.Name
		}
	}

	srv := clients.Server{Endpoint: in.Endpoint, Command: in.Command, Token: kept}
	if kept == "" {
		srv.Token = "<new token for " + c.ID + ">"
	}
	out, changed, err := c.Apply(text, srv)
	if err != nil {
		return bad(err)
	}
	if !changed {
		fmt.Fprintf(in.Out, "%s: %s already set up (token %q), unchanged\n", c.Name, shown, keptName)
		return nil
	}
	if in.Print {
		return in.show(c, shown, text, out, cur, keptName)
	}

	scope := in.Scope
	if scope == "" {
		scope = store.ScopeOperate
	}
	name := keptName
	if kept == "" {
		if name, srv.Token, err = in.mint(ctx, c.ID, scope); err != nil {
			return err
		}
		if out, _, err = c.Apply(text, srv); err != nil {
			in.revoke(ctx, name)
			return bad(err)
		}
	}
	backup, err := in.write(path, text, out, before)
	if err != nil {
		if kept == "" {
			in.revoke(ctx, name)
		}
		return err
	}
	in.wrote = true
	msg := fmt.Sprintf("%s: wrote %s (token %q", c.Name, shown, name)
	if kept == "" {
		msg += ", " + string(scope) + ", new"
	}
	msg += ")"
	if backup != "" {
		msg += "; the old file is " + in.Host.Tilde(backup)
	}
	fmt.Fprintln(in.Out, msg)
	if replaced != "" {
		if err := in.Store.RevokeToken(ctx, replaced, in.Now()); err == nil {
			fmt.Fprintf(in.Out, "%s: revoked its previous token %q (scope %s)\n", c.Name, replaced, otherScope(scope))
		}
	}
	if c.ID == "claude-desktop" && strings.Contains(in.Command, "go-build") {
		fmt.Fprintf(in.Out, "%s: warning: its entry starts %s, a temporary build from `go run`; install gridcity and run --install again\n", c.Name, in.Command)
	}
	return nil
}

// ownedBy reports whether a token name is this client's: the client's ID, or
// the ID and a number when that name was taken.
func ownedBy(name, id string) bool {
	if name == id {
		return true
	}
	n, ok := strings.CutPrefix(name, id+"-")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}

func otherScope(s store.Scope) store.Scope {
	if s == store.ScopeRead {
		return store.ScopeOperate
	}
	return store.ScopeRead
}

// mint creates the client's token, named after it: "cursor", or "cursor-2"
// when a live token has that name already (held by another machine's Cursor,
// or by a file gridcity can no longer read).
func (in *Installer) mint(ctx context.Context, id string, scope store.Scope) (string, string, error) {
	ts, err := in.Store.Tokens(ctx)
	if err != nil {
		return "", "", err
	}
	live := map[string]bool{}
	for _, t := range ts {
		if t.RevokedAt.IsZero() {
			live[t.Name] = true
		}
	}
	name := id
	for i := 2; live[name]; i++ {
		name = fmt.Sprintf("%s-%d", id, i)
	}
	tok, err := in.Mint(ctx, name, scope)
	return name, tok, err
}

// revoke undoes a token minted for a file that could not be written.
func (in *Installer) revoke(ctx context.Context, name string) {
	_ = in.Store.RevokeToken(ctx, name, in.Now())
}

// write replaces the file durably and atomically (atomicfile), mode 0600 as
// it holds a token (or the old mode where that was stricter), after copying
// the old file to FILE.bak-gridcity-TIME. It returns the backup's path.
func (in *Installer) write(path string, old, data []byte, before os.FileInfo) (string, error) {
	mode := os.FileMode(0o600)
	if before != nil {
		if m := before.Mode().Perm() & 0o600; m != 0 {
			mode = m
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	backup := ""
	if before != nil {
		stamp := in.Now().Format("20060102-150405")
		for i := 1; ; i++ {
			backup = path + ".bak-gridcity-" + stamp
			if i > 1 {
				backup += "-" + strconv.Itoa(i)
			}
			f, err := os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, os.ErrExist) && i < 100 {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("back up %s: %w", path, err)
			}
			_, err = f.Write(old)
			if err == nil {
				// The backup's directory entry is made durable with the
				// new file's, by the commit below.
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(backup)
				return "", fmt.Errorf("back up %s: %w", path, err)
			}
			break
		}
	}
	p, err := atomicfile.Create(path, mode)
	if err != nil {
		return "", err
	}
	defer p.Discard() // after the commit there is nothing to discard
	if _, err := p.Write(data); err != nil {
		return "", err
	}
	// The client may have rewritten its file since it was read.
	now, err := os.Stat(path)
	switch {
	case before == nil && err == nil, before != nil && (err != nil || !now.ModTime().Equal(before.ModTime()) || now.Size() != before.Size()):
		if backup != "" {
			os.Remove(backup)
		}
		return "", errChangedMeanwhile
	}
	if err := p.Commit(); err != nil {
		return "", err
	}
	return backup, nil
}

// show prints what --install would do to one file: its path and the lines
// that would change, with a few around them. The rest of the file (other
// servers' keys, a client's own state) stays out of the terminal, and so does
// the tokens: a new one reads <new token for ID>, a kept one <token "NAME">,
// one being replaced <the token there now>.
func (in *Installer) show(c clients.Client, shown string, old, out []byte, cur, keptName string) error {
	verb := "would update"
	if old == nil {
		verb = "would create"
	}
	tokenNote := "a new token named after it"
	if keptName != "" {
		tokenNote = fmt.Sprintf("its token %q, kept", keptName)
	}
	fmt.Fprintf(in.Out, "%s: %s %s (%s):\n", c.Name, verb, shown, tokenNote)
	d := lineDiff(string(old), string(out), 3)
	switch {
	case keptName != "":
		d = strings.ReplaceAll(d, cur, fmt.Sprintf("<token %q>", keptName))
	case cur != "":
		d = strings.ReplaceAll(d, cur, "<the token there now>")
	}
	fmt.Fprint(in.Out, d)
	return nil
}

// lineDiff shows the one region where b differs from a (an install edits
// one entry) as a unified-diff hunk with context lines around it.
func lineDiff(a, b string, context int) string {
	al, bl := splitLines(a), splitLines(b)
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	from := max(pre-context, 0)
	aTo, bTo := min(len(al)-suf+context, len(al)), min(len(bl)-suf+context, len(bl))
	var w bytes.Buffer
	start := func(n int) int { // unified diff numbers an empty side's range from 0
		if n == 0 {
			return from
		}
		return from + 1
	}
	fmt.Fprintf(&w, "@@ -%d,%d +%d,%d @@\n", start(aTo-from), aTo-from, start(bTo-from), bTo-from)
	for _, l := range al[from:pre] {
		w.WriteString("  " + l + "\n")
	}
	for _, l := range al[pre : len(al)-suf] {
		w.WriteString("- " + l + "\n")
	}
	for _, l := range bl[pre : len(bl)-suf] {
		w.WriteString("+ " + l + "\n")
	}
	for _, l := range bl[len(bl)-suf : bTo] {
		w.WriteString("  " + l + "\n")
	}
	return w.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
