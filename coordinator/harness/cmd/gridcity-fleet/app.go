package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// schema makes the orders table and, the first time, a few orders.
const schema = `CREATE TABLE IF NOT EXISTS orders (
	id serial PRIMARY KEY,
	item text NOT NULL,
	qty integer NOT NULL,
	placed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO orders (item, qty)
	SELECT * FROM (VALUES ('desk lamp', 2), ('kettle', 1), ('bicycle bell', 3), ('umbrella', 1)) AS v(item, qty)
	WHERE NOT EXISTS (SELECT 1 FROM orders);`

// cmdApp is the demo's orders API: /health and /api/orders query
// PostgreSQL on every request, over one kept connection (so the agents see
// the API using the database), and answer 503 with the database's error
// when it fails.
func cmdApp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("app", stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	db := fs.String("db", "127.0.0.1:5432", "PostgreSQL HOST:PORT")
	dbUser := fs.String("db-user", "postgres", "PostgreSQL user (trust authentication)")
	dbName := fs.String("db-name", "postgres", "PostgreSQL database")
	timeout := fs.Duration("db-timeout", time.Second, "how long a query may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	o := &orders{addr: *db, user: *dbUser, db: *dbName, timeout: *timeout, logger: logger}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: o.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	logger.Info("orders API listening", "addr", ln.Addr().String(), "db", *db)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	o.mu.Lock()
	if o.conn != nil {
		o.conn.close()
	}
	o.mu.Unlock()
	return nil
}

type orders struct {
	addr, user, db string
	timeout        time.Duration
	logger         *slog.Logger

	mu       sync.Mutex
	conn     *pgConn
	prepared bool
}

func (o *orders) routes() http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		rows, err := o.query(r.Context(), "SELECT count(*) FROM orders")
		if err == nil && (len(rows) != 1 || len(rows[0]) != 1) {
			err = fmt.Errorf("SELECT count(*) returned %d rows", len(rows))
		}
		if err != nil {
			o.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "database": o.addr, "orders": atoi(rows[0][0])})
	}
	mux.HandleFunc("GET /health", health)
	mux.HandleFunc("GET /api/health", health)
	mux.HandleFunc("GET /api/orders", func(w http.ResponseWriter, r *http.Request) {
		rows, err := o.query(r.Context(), "SELECT id, item, qty, to_char(placed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM orders ORDER BY id")
		if err != nil {
			o.fail(w, err)
			return
		}
		type order struct {
			ID       int    `json:"id"`
			Item     string `json:"item"`
			Qty      int    `json:"qty"`
			PlacedAt string `json:"placedAt"`
		}
		out := []order{}
		for _, row := range rows {
			if len(row) == 4 {
				out = append(out, order{ID: atoi(row[0]), Item: row[1], Qty: atoi(row[2]), PlacedAt: row[3]})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"orders": out})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the orders API of the gridcity demo: /health, /api/orders")
	})
	return mux
}

// fail answers 503 with the database's error, which the probes of the
// coordinator quote in their reasons.
func (o *orders) fail(w http.ResponseWriter, err error) {
	o.logger.Warn("the database failed", "db", o.addr, "err", err)
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "down", "database": o.addr, "error": err.Error()})
}

// query runs sql on the kept connection, connecting (and preparing the
// schema) first when there is none; a failed connection is dropped and
// made anew by the next request.
func (o *orders) query(ctx context.Context, sql string) ([][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == nil {
		c, err := pgConnect(ctx, o.addr, o.user, o.db)
		if err != nil {
			return nil, err
		}
		o.conn = c
		o.logger.Info("connected to the database", "db", o.addr)
	}
	if !o.prepared {
		if _, err := o.conn.query(ctx, schema); err != nil {
			o.drop(err)
			return nil, fmt.Errorf("prepare the orders table: %w", err)
		}
		o.prepared = true
	}
	rows, err := o.conn.query(ctx, sql)
	if err != nil {
		o.drop(err)
		return nil, err
	}
	return rows, nil
}

// drop closes the connection unless the error was the server's answer to a
// query on a connection that still works.
func (o *orders) drop(err error) {
	var pe *pgError
	if errors.As(err, &pe) && pe.Severity == "ERROR" {
		return
	}
	o.conn.close()
	o.conn = nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
