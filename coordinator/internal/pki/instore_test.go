package pki

import (
	"bytes"
	"context"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The store tests run on a real PostgreSQL too.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// secretForms are the ways the CA's private key could sit in a table or a
// dump: its DER (SEC 1 and PKCS#8), its scalar, each raw, in hex and in
// base64 (JSON's form of bytes), and any PEM block of a private key.
func secretForms(t *testing.T, ca *CA) map[string][]byte {
	t.Helper()
	sec1, pkcs8 := clearDER(t, ca)
	scalar, err := ca.key.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string][]byte{"PRIVATE KEY PEM text": []byte("PRIVATE KEY")}
	for name, b := range map[string][]byte{"SEC 1 DER": sec1, "PKCS#8 DER": pkcs8, "scalar": scalar} {
		forms[name] = b
		forms[name+" in hex"] = []byte(hex.EncodeToString(b))
		forms[name+" in base64"] = []byte(base64.StdEncoding.EncodeToString(b))
	}
	return forms
}

func clearDER(t *testing.T, ca *CA) (sec1, pkcs8 []byte) {
	t.Helper()
	sec1, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if pkcs8, err = x509.MarshalPKCS8PrivateKey(ca.key); err != nil {
		t.Fatal(err)
	}
	return sec1, pkcs8
}

// findIn reports each secret form found in b, as "FORM in WHERE".
func findIn(forms map[string][]byte, where string, b []byte) []string {
	var found []string
	for name, f := range forms {
		if bytes.Contains(b, f) {
			found = append(found, name+" in "+where)
		}
	}
	return found
}

// sqliteCells scans every column of every row of every table of the
// SQLite store in dir.
func sqliteCells(t *testing.T, dir string, forms map[string][]byte) (found []string, columns map[string]bool) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gridcity.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	columns = map[string]bool{}
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	for _, table := range tables {
		rows, err := db.Query(fmt.Sprintf(`SELECT * FROM %q`, table))
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				columns[table+"."+cols[i]] = true
				found = append(found, findIn(forms, table+"."+cols[i], v)...)
			}
		}
		rows.Close()
	}
	return found, columns
}

// postgresCells scans every column of every row of every table of the
// store's schema, listed by information_schema, as PostgreSQL sends them.
func postgresCells(t *testing.T, url string, forms map[string][]byte) (found []string, columns map[string]bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	columns = map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		rows, err := conn.Query(ctx, `SELECT * FROM `+pgx.Identifier{table}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			for i, v := range rows.RawValues() {
				col := table + "." + rows.FieldDescriptions()[i].Name
				columns[col] = true
				found = append(found, findIn(forms, col, v)...)
			}
		}
		rows.Close()
	}
	return found, columns
}

// Whoever reads the store (a copy of the SQLite file, a pg_dump, a
// SELECT) finds no CA key in it: not in any column of any table, on
// either engine, for a CA made sealed and for an older store's CA sealed
// at start; on SQLite not in the database's files either, and on
// PostgreSQL not in a pg_dump.
func TestCAKeyIsInNoTable(t *testing.T) {
	for _, older := range []bool{false, true} {
		name := "new"
		if older {
			name = "older store sealed at start"
		}
		t.Run("sqlite/"+name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := store.OpenSQLite(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ca := makeIn(t, st, older)
			forms := secretForms(t, ca)
			found, columns := sqliteCells(t, dir, forms)
			scannedTheCA(t, columns)
			for _, f := range []string{"gridcity.db", "gridcity.db-wal"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				found = append(found, findIn(forms, f, b)...)
			}
			if len(found) > 0 {
				t.Fatalf("the CA key is in the store: %s", strings.Join(found, "; "))
			}
		})
		t.Run("postgres/"+name, func(t *testing.T) {
			url := pgtest.Database(t)
			st, err := store.OpenPostgres(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ca := makeIn(t, st, older)
			forms := secretForms(t, ca)
			found, columns := postgresCells(t, url, forms)
			scannedTheCA(t, columns)
			found = append(found, findIn(forms, "pg_dump", pgDump(t, url))...)
			if len(found) > 0 {
				t.Fatalf("the CA key is in the store: %s", strings.Join(found, "; "))
			}
		})
	}
}

// scannedTheCA fails a scan that did not read the CA's row.
func scannedTheCA(t *testing.T, columns map[string]bool) {
	t.Helper()
	if !columns["blobs.value"] || !columns["blobs.key"] {
		t.Fatalf("the scan read the columns %v; want blobs.key and blobs.value among them", columns)
	}
}

// makeIn makes the CA in st as serve does; older, as an older gridcity
// did (its key in the clear), then sealed as serve does at its start.
func makeIn(t *testing.T, st Store, older bool) *CA {
	t.Helper()
	ca := load(t, st)
	if older {
		ca = newCA(t)
		blob := olderStore(t, ca).blobs["ca.pem"]
		cur, _ := st.Blob(context.Background(), "ca.pem")
		if err := st.SwapBlob(context.Background(), "ca.pem", cur, blob); err != nil {
			t.Fatal(err)
		}
		if got := load(t, st); got.Pin() != ca.Pin() {
			t.Fatalf("sealed %s; want the older store's CA %s", got.Pin(), ca.Pin())
		}
	}
	// What was made and read back by another start is the same CA.
	if again := load(t, st); again.Pin() != ca.Pin() {
		t.Fatalf("reloaded CA %s; want %s", again.Pin(), ca.Pin())
	}
	return ca
}

// pgDump dumps the database at url with the pg_dump beside the server the
// tests run; nil (logged) when there is none.
func pgDump(t *testing.T, url string) []byte {
	t.Helper()
	postgres, err := netlab.Postgres.Path()
	if err != nil {
		t.Logf("no pg_dump: %v", err)
		return nil
	}
	out, err := exec.Command(filepath.Join(filepath.Dir(postgres), "pg_dump"), "--dbname", url).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(out, []byte("CREATE TABLE public.blobs")) {
		t.Fatalf("pg_dump printed no blobs table:\n%s", out)
	}
	return out
}
