package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/web"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

func cmdApprover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("approver", stderr)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, `add: print {"name","password"}`)
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
	case len(pos) == 2 && (pos[0] == "add" || pos[0] == "reset"):
		name := pos[1]
		if err := validApproverName(name); err != nil {
			return err
		}
		pw := web.NewPassword()
		hash, err := web.HashPassword(pw)
		if err != nil {
			return err
		}
		if pos[0] == "add" {
			err = st.CreateApprover(ctx, store.Approver{Name: name, PasswordHash: hash, CreatedAt: time.Now()})
			if errors.Is(err, store.ErrExists) {
				return fmt.Errorf("an approver named %q exists; `gridcity approver reset %s` gives them a new password", name, name)
			}
		} else if err = st.SetApproverPassword(ctx, name, hash); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no approver named %q; `gridcity approver list` shows them", name)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(map[string]string{"name": name, "password": pw})
		}
		fmt.Fprintf(stdout, "Approver %q can log in to the app with this password, shown once:\n\n  %s\n", name, pw)
		return nil
	case len(pos) == 1 && pos[0] == "list":
		as, err := st.Approvers(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tCREATED")
		for _, a := range as {
			fmt.Fprintf(tw, "%s\t%s\n", a.Name, a.CreatedAt.Local().Format("2006-01-02 15:04"))
		}
		return tw.Flush()
	}
	return fmt.Errorf("approver %s: say add NAME, reset NAME or list", strings.TrimSpace(strings.Join(pos, " ")))
}

func validApproverName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ':' }) {
		return fmt.Errorf("approver name %q: use 1–64 printable characters without spaces or ':'", name)
	}
	return nil
}

// ensureAdmin creates the approver "admin" on a coordinator's first start,
// printing its password once and writing it to DATA/admin-password (0600).
func ensureAdmin(ctx context.Context, st store.Store, data string, stdout io.Writer, logger *slog.Logger) error {
	as, err := st.Approvers(ctx)
	if err != nil || len(as) > 0 {
		return err
	}
	pw := web.NewPassword()
	hash, err := web.HashPassword(pw)
	if err != nil {
		return err
	}
	if err := st.CreateApprover(ctx, store.Approver{Name: "admin", PasswordHash: hash, CreatedAt: time.Now()}); errors.Is(err, store.ErrExists) {
		// Another coordinator on the same database, started at the same
		// time, made admin between the look above and this create: its
		// host has the password.
		logger.Info("the approver admin was created by another coordinator on this store; its password is in that one's admin-password file")
		return nil
	} else if err != nil {
		return err
	}
	path := filepath.Join(data, "admin-password")
	if err := atomicfile.Write(data, "admin-password", []byte(pw+"\n")); err != nil {
		return err
	}
	// Printed only to a person at a terminal: under systemd, stdout is the
	// journal, which others may read; the file is readable by the service
	// user alone.
	if f, ok := stdout.(*os.File); ok && isTerminal(f) {
		fmt.Fprintf(stdout, "First start: the approver \"admin\" logs in to the app with password %s (also in %s). Add people with `gridcity approver add NAME`.\n", pw, path)
	}
	logger.Info("created the approver admin; its password is in the admin-password file", "file", path)
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
