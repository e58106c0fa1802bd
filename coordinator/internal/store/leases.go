package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// StreamLease says which replica holds a server's agent stream: the
// replicas sharing a store show the servers the others hold as online for
// as long as the holder is live (beating, see Replica). Replica is "" once
// the holder released it (the stream ended).
type StreamLease struct {
	Server    string
	Replica   string
	Since     time.Time // when the stream opened
	ChangedAt time.Time // when the lease was last written
}

// leasesTable is the same on both engines. A released lease is kept, with
// no replica, so that readers of what changed since a time see releases
// too; servers get an index on last_seen for ServersSeenSince.
const leasesTable = `CREATE TABLE stream_leases (
		server TEXT PRIMARY KEY,
		replica TEXT NOT NULL,
		since BIGINT NOT NULL,
		changed_at BIGINT NOT NULL
	);
	CREATE INDEX stream_leases_changed ON stream_leases(changed_at);
	CREATE INDEX servers_last_seen ON servers(last_seen);`

const (
	leaseHold = `INSERT INTO stream_leases(server, replica, since, changed_at) VALUES ($1,$2,$3,$4)
		ON CONFLICT(server) DO UPDATE SET replica = excluded.replica, since = excluded.since, changed_at = excluded.changed_at`
	leaseRelease = `UPDATE stream_leases SET replica = '', changed_at = $1 WHERE server = $2 AND replica = $3`
)

func checkLeases(replica string, held []StreamLease) error {
	if replica == "" {
		return errors.New("save stream leases: no replica id")
	}
	for _, l := range held {
		if l.Server == "" {
			return fmt.Errorf("save stream leases of replica %s: a lease has no server name", replica)
		}
	}
	return nil
}

// server, replica, since, changed_at.
func scanLease(scan func(...any) error) (StreamLease, error) {
	var l StreamLease
	var since, changed int64
	err := scan(&l.Server, &l.Replica, &since, &changed)
	l.Since, l.ChangedAt = fromMs(since), fromMs(changed)
	return l, err
}

func (s *SQLite) SaveStreamLeases(ctx context.Context, replica string, held []StreamLease, released []string, now time.Time) error {
	if err := checkLeases(replica, held); err != nil {
		return err
	}
	if len(held) == 0 && len(released) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, l := range held {
		if _, err := tx.ExecContext(ctx, leaseHold, l.Server, replica, ms(l.Since), ms(now)); err != nil {
			return fmt.Errorf("lease the stream of %s to replica %s: %w", l.Server, replica, err)
		}
	}
	for _, name := range released {
		if _, err := tx.ExecContext(ctx, leaseRelease, ms(now), name, replica); err != nil {
			return fmt.Errorf("release the stream of %s from replica %s: %w", name, replica, err)
		}
	}
	return tx.Commit()
}

func (s *SQLite) StreamLeases(ctx context.Context, since time.Time) ([]StreamLease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT server, replica, since, changed_at FROM stream_leases WHERE changed_at >= ? ORDER BY server`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("read stream leases: %w", err)
	}
	defer rows.Close()
	return collect(rows, scanLease)
}

// SQLite reads the rows whole: they are on this machine.
func (s *SQLite) ServersSeenSince(ctx context.Context, since time.Time, wanted func(name string, lastSeen time.Time) bool) ([]ServerRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, state, hello, last_seen FROM servers WHERE last_seen >= ? ORDER BY name`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("read servers seen since %s: %w", since.Format(time.RFC3339), err)
	}
	defer rows.Close()
	rs, err := collect(rows, scanServer)
	if wanted != nil {
		rs = slices.DeleteFunc(rs, func(r ServerRecord) bool { return !wanted(r.Name, r.LastSeen) })
	}
	return rs, err
}

func (p *Postgres) SaveStreamLeases(ctx context.Context, replica string, held []StreamLease, released []string, now time.Time) error {
	if err := checkLeases(replica, held); err != nil {
		return err
	}
	if len(held) == 0 && len(released) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, l := range held {
		b.Queue(leaseHold, l.Server, replica, ms(l.Since), ms(now))
	}
	for _, name := range released {
		b.Queue(leaseRelease, ms(now), name, replica)
	}
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		return sendBatch(ctx, tx, b, func(i int) string {
			if i < len(held) {
				return fmt.Sprintf("lease the stream of %s to replica %s", held[i].Server, replica)
			}
			return fmt.Sprintf("release the stream of %s from replica %s", released[i-len(held)], replica)
		})
	})
}

func (p *Postgres) StreamLeases(ctx context.Context, since time.Time) ([]StreamLease, error) {
	ls, err := pgList(ctx, p, scanLease, `SELECT server, replica, since, changed_at FROM stream_leases WHERE changed_at >= $1 ORDER BY server COLLATE "C"`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("read stream leases: %w", err)
	}
	return ls, nil
}

// PostgreSQL is read in two steps when wanted is given: the names and
// times of the servers seen since, then whole only the rows wanted. A
// replica reads again every server seen within the reload overlap, most of
// which it holds as they are; their states stay in the database.
func (p *Postgres) ServersSeenSince(ctx context.Context, since time.Time, wanted func(name string, lastSeen time.Time) bool) ([]ServerRecord, error) {
	what := func(err error) error {
		return fmt.Errorf("read servers seen since %s: %w", since.Format(time.RFC3339), err)
	}
	if wanted == nil {
		rs, err := pgList(ctx, p, scanServer, `SELECT name, state, hello, last_seen FROM servers WHERE last_seen >= $1 ORDER BY name COLLATE "C"`, ms(since))
		if err != nil {
			return nil, what(err)
		}
		return rs, nil
	}
	seen, err := pgList(ctx, p, func(scan func(...any) error) (ServerRecord, error) {
		var r ServerRecord
		var last int64
		err := scan(&r.Name, &last)
		r.LastSeen = fromMs(last)
		return r, err
	}, `SELECT name, last_seen FROM servers WHERE last_seen >= $1`, ms(since))
	if err != nil {
		return nil, what(err)
	}
	var names []string
	for _, r := range seen {
		if wanted(r.Name, r.LastSeen) {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	rs, err := pgList(ctx, p, scanServer, `SELECT name, state, hello, last_seen FROM servers WHERE name = ANY($1) ORDER BY name COLLATE "C"`, names)
	if err != nil {
		return nil, what(err)
	}
	return rs, nil
}
