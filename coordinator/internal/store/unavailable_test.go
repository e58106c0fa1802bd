package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestPostgresOutageIsErrUnavailableAndThePoolRecovers: while PostgreSQL
// is down every kind of call (a read, a row, a transaction, a batch)
// fails with ErrUnavailable naming the database's address and never its
// password; once it is back the same store, not a new one, answers again.
func TestPostgresOutageIsErrUnavailableAndThePoolRecovers(t *testing.T) {
	srv := pgtest.Own(t)
	st := openPostgres(t, srv.Database(t, ""))
	ctx := context.Background()
	now := time.Now()
	save := func(id string) error {
		return st.SaveRequestAudited(ctx, RequestRecord{ID: id, Server: "web-1", Status: "pending", CreatedAt: now, Body: []byte("{}")},
			AuditEntry{At: now, RequestID: id, Step: "requested", Actor: "test", Detail: []byte("{}")})
	}
	calls := []struct {
		name string
		call func(i int) error
	}{
		{"a list (Agents)", func(int) error { _, err := st.Agents(ctx); return err }},
		{"a transaction (SaveRequestAudited)", func(i int) error { return save(fmt.Sprintf("cmd_%d", i)) }},
		{"a row (Request)", func(int) error { _, err := st.Request(ctx, "cmd_0"); return err }},
		{"a batch (HeartbeatReplica)", func(int) error {
			return st.HeartbeatReplica(ctx, Replica{ID: "r1", GRPC: "127.0.0.1:4601", HTTP: "127.0.0.1:4600", HeartbeatAt: time.Now()}, now.Add(-time.Hour))
		}},
		{"a statement (RemoveReplica)", func(int) error { return st.RemoveReplica(ctx, "nobody") }},
	}
	for _, c := range calls {
		if err := c.call(0); err != nil {
			t.Fatalf("%s before the outage: %v", c.name, err)
		}
	}

	srv.Halt()
	for _, c := range calls {
		err := c.call(1)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s during the outage: got %v; want ErrUnavailable", c.name, err)
		}
		t.Logf("%s during the outage: %v", c.name, err)
		var u *UnavailableError
		if !errors.As(err, &u) || u.Addr != srv.Addr() {
			t.Errorf("%s during the outage: %v does not name the database at %s", c.name, err, srv.Addr())
		}
		if !strings.Contains(err.Error(), "the store (PostgreSQL at "+srv.Addr()+") is unreachable") {
			t.Errorf("%s during the outage says %q; want it to say the store at %s is unreachable", c.name, err, srv.Addr())
		}
		if strings.Contains(err.Error(), srv.Password()) {
			t.Errorf("%s during the outage: the error carries the password: %v", c.name, err)
		}
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if err := c.call(2 + i); err != nil {
			t.Errorf("%s after PostgreSQL came back: %v; want the pool to have reconnected", c.name, err)
		}
	}
	if _, err := st.Request(ctx, "cmd_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the request saved during the outage: got %v; want ErrNotFound (nothing was written)", err)
	}
}

// TestUnreachable: what counts as an outage, and what is the database
// answering (a refusal the caller must see as it is).
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{fmt.Errorf("save: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("acquire: %w", pgconn.ErrConnClosed), true},
		{&pgconn.PgError{Code: "23505", Message: "duplicate key"}, false},
		{&pgconn.PgError{Code: "28P01", Message: "password authentication failed"}, false},
		{context.Canceled, false},
		{ErrNotFound, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}
