package store

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnavailable is a store that cannot be reached (PostgreSQL stopped,
// restarting, or cut off by the network): nothing was read or written,
// and trying again once it is back is the remedy. Callers match it with
// errors.Is and say what waits until then; UnavailableError says where.
var ErrUnavailable = errors.New("the store is unreachable")

// UnavailableError is ErrUnavailable with the address of the database and
// the driver's error (never the password).
type UnavailableError struct {
	// Addr is the database's HOST:PORT (or socket directory).
	Addr string
	Err  error
}

// Summary says what is wrong without the driver's words, for a sentence
// that goes on to say what waits.
func (e *UnavailableError) Summary() string {
	return "the store (PostgreSQL at " + e.Addr + ") is unreachable"
}

func (e *UnavailableError) Error() string        { return e.Summary() + " (" + e.Err.Error() + ")" }
func (e *UnavailableError) Unwrap() error        { return e.Err }
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// unreachable says whether err means the database could not be reached
// or the connection to it was lost, rather than a statement it refused.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code[:2] == "08": // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shut down, crashed, starting up
			return true
		case pe.Code == "53300": // too many connections, as during a failover
			return true
		}
		return false // the server answered: a refusal, not an outage
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// pgDB is the pool as the engine uses it: every error that comes out of it
// has the password masked, and one that says the database cannot be
// reached is an UnavailableError, so that every method's error tells an
// outage apart from a refusal without each method saying so.
type pgDB struct {
	pool *pgxpool.Pool
	// addr is HOST:PORT for messages; rawURL, shown and secret mask the
	// password (see redactErr).
	addr, rawURL, shown, secret string
}

func (d *pgDB) classify(err error) error {
	if err == nil {
		return nil
	}
	err = redactErr(err, d.rawURL, d.shown, d.secret)
	if unreachable(err) && !errors.Is(err, ErrUnavailable) {
		return &UnavailableError{Addr: d.addr, Err: err}
	}
	return err
}

func (d *pgDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.pool.Exec(ctx, sql, args...)
	return tag, d.classify(err)
}

func (d *pgDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, d.classify(err)
	}
	return pgRows{Rows: rows, d: d}, nil
}

func (d *pgDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pgRow{row: d.pool.QueryRow(ctx, sql, args...), d: d}
}

// BeginFunc runs fn in a transaction (pgx.BeginFunc), its error classified.
func (d *pgDB) BeginFunc(ctx context.Context, fn func(pgx.Tx) error) error {
	return d.classify(pgx.BeginFunc(ctx, d, fn))
}

// Begin starts a transaction (pgx.BeginFunc(ctx, p.pool, …) works as
// on the pool); only its own error is classified: BeginFunc classifies
// the whole.
func (d *pgDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.pool.Begin(ctx)
	return tx, d.classify(err)
}

func (d *pgDB) Ping(ctx context.Context) error { return d.classify(d.pool.Ping(ctx)) }

func (d *pgDB) Close() { d.pool.Close() }

type pgRow struct {
	row pgx.Row
	d   *pgDB
}

func (r pgRow) Scan(dest ...any) error { return r.d.classify(r.row.Scan(dest...)) }

type pgRows struct {
	pgx.Rows
	d *pgDB
}

func (r pgRows) Err() error { return r.d.classify(r.Rows.Err()) }
