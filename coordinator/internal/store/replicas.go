package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replica is one coordinator serving the store: with PostgreSQL several
// replicas share it, and agents learn from any of them where the others
// are. With SQLite there is one.
type Replica struct {
	ID string
	// GRPC is the HOST:PORT agents dial (the advertised address); HTTP is
	// where its MCP endpoint and app listen.
	GRPC, HTTP  string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// HandoffKey is the public key (HPKE, X25519) this replica made at
	// its start: approved commands for the agents it holds are sealed to
	// it (see Handoff). Its private half never leaves the process.
	HandoffKey []byte
}

// replicasTable is the same on both engines: text and Unix milliseconds.
const replicasTable = `CREATE TABLE replicas (
		id TEXT PRIMARY KEY,
		grpc_addr TEXT NOT NULL,
		http_addr TEXT NOT NULL,
		started_at BIGINT NOT NULL,
		heartbeat_at BIGINT NOT NULL
	);
	CREATE INDEX replicas_heartbeat ON replicas(heartbeat_at);`

// checkReplica refuses a beat that would list a replica agents cannot use.
func checkReplica(r Replica) error {
	switch {
	case r.ID == "":
		return errors.New("record replica: it has no id")
	case r.GRPC == "":
		return fmt.Errorf("record replica %s: it has no gRPC address", r.ID)
	case r.HeartbeatAt.IsZero():
		return fmt.Errorf("record replica %s: its heartbeat has no time", r.ID)
	}
	return nil
}

// id, grpc_addr, http_addr, started_at, heartbeat_at, handoff_key.
func scanReplica(scan func(...any) error) (Replica, error) {
	var r Replica
	var started, beat int64
	err := scan(&r.ID, &r.GRPC, &r.HTTP, &started, &beat, &r.HandoffKey)
	r.StartedAt, r.HeartbeatAt = fromMs(started), fromMs(beat)
	return r, err
}

func (s *SQLite) HeartbeatReplica(ctx context.Context, r Replica, forgetBefore time.Time) error {
	if err := checkReplica(r); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO replicas(id, grpc_addr, http_addr, started_at, heartbeat_at, handoff_key) VALUES (?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET grpc_addr = excluded.grpc_addr, http_addr = excluded.http_addr, heartbeat_at = excluded.heartbeat_at, handoff_key = excluded.handoff_key`,
		r.ID, r.GRPC, r.HTTP, ms(startedOr(r)), ms(r.HeartbeatAt), nonNil(r.HandoffKey)); err != nil {
		return fmt.Errorf("record replica %s: %w", r.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE heartbeat_at < ? AND id <> ?`, ms(forgetBefore), r.ID); err != nil {
		return fmt.Errorf("forget silent replicas: %w", err)
	}
	return tx.Commit()
}

func (s *SQLite) Replicas(ctx context.Context, since time.Time) ([]Replica, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, grpc_addr, http_addr, started_at, heartbeat_at, handoff_key FROM replicas WHERE heartbeat_at >= ? ORDER BY started_at, id`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	defer rows.Close()
	return collect(rows, scanReplica)
}

func (s *SQLite) RemoveReplica(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM replicas WHERE id = ?`, id); err != nil {
		return fmt.Errorf("remove replica %s: %w", id, err)
	}
	return nil
}

func (p *Postgres) HeartbeatReplica(ctx context.Context, r Replica, forgetBefore time.Time) error {
	if err := checkReplica(r); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO replicas(id, grpc_addr, http_addr, started_at, heartbeat_at, handoff_key) VALUES ($1,$2,$3,$4,$5,$6)
		ON CONFLICT(id) DO UPDATE SET grpc_addr = excluded.grpc_addr, http_addr = excluded.http_addr, heartbeat_at = excluded.heartbeat_at, handoff_key = excluded.handoff_key`,
		r.ID, r.GRPC, r.HTTP, ms(startedOr(r)), ms(r.HeartbeatAt), nonNil(r.HandoffKey))
	b.Queue(`DELETE FROM replicas WHERE heartbeat_at < $1 AND id <> $2`, ms(forgetBefore), r.ID)
	return p.pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		return sendBatch(ctx, tx, b, func(i int) string {
			if i == 0 {
				return "record replica " + r.ID
			}
			return "forget silent replicas"
		})
	})
}

func (p *Postgres) Replicas(ctx context.Context, since time.Time) ([]Replica, error) {
	rs, err := pgList(ctx, p, scanReplica, `SELECT id, grpc_addr, http_addr, started_at, heartbeat_at, handoff_key FROM replicas WHERE heartbeat_at >= $1 ORDER BY started_at, id COLLATE "C"`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return rs, nil
}

func (p *Postgres) RemoveReplica(ctx context.Context, id string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, id); err != nil {
		return fmt.Errorf("remove replica %s: %w", id, err)
	}
	return nil
}

// startedOr is the replica's start, or its heartbeat when it has none.
func startedOr(r Replica) time.Time {
	if r.StartedAt.IsZero() {
		return r.HeartbeatAt
	}
	return r.StartedAt
}
