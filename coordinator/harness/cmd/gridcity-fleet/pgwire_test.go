package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"testing"
	"time"
)

func pgMsg(typ byte, payload []byte) []byte {
	m := []byte{typ}
	m = binary.BigEndian.AppendUint32(m, uint32(len(payload)+4))
	return append(m, payload...)
}

func dataRow(fields ...[]byte) []byte {
	p := binary.BigEndian.AppendUint16(nil, uint16(len(fields)))
	for _, f := range fields {
		if f == nil {
			p = binary.BigEndian.AppendUint32(p, 0xffffffff)
			continue
		}
		p = binary.BigEndian.AppendUint32(p, uint32(len(f)))
		p = append(p, f...)
	}
	return p
}

// The client against a scripted server: trust authentication, a query with rows (a NULL among
// them), a query the server refuses (the connection stays usable), and a server that asks for
// a password.
func TestPGClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errResp := []byte("SERROR\x00C42P01\x00Mrelation \"nope\" does not exist\x00\x00")
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			var n uint32
			binary.Read(r, binary.BigEndian, &n)
			r.Discard(int(n) - 4) // the startup message
			if i == 1 {
				c.Write(pgMsg('R', binary.BigEndian.AppendUint32(nil, 10))) // SASL
				c.Close()
				continue
			}
			c.Write(slices.Concat(pgMsg('R', make([]byte, 4)), pgMsg('S', []byte("server_version\x0015\x00")), pgMsg('K', make([]byte, 8)), pgMsg('Z', []byte{'I'})))
			for {
				typ, _ := r.ReadByte()
				if typ != 'Q' {
					c.Close()
					break
				}
				binary.Read(r, binary.BigEndian, &n)
				q := make([]byte, n-4)
				r.Read(q)
				if bytes.Contains(q, []byte("nope")) {
					c.Write(slices.Concat(pgMsg('E', errResp), pgMsg('Z', []byte{'I'})))
					continue
				}
				c.Write(slices.Concat(pgMsg('T', []byte{0, 2}), pgMsg('D', dataRow([]byte("1"), []byte("lamp"))), pgMsg('D', dataRow([]byte("2"), nil)),
					pgMsg('C', []byte("SELECT 2\x00")), pgMsg('Z', []byte{'I'})))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgConnect(ctx, ln.Addr().String(), "postgres", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := c.query(ctx, "SELECT id, item FROM orders")
	if err != nil || len(rows) != 2 || !slices.Equal(rows[0], []string{"1", "lamp"}) || !slices.Equal(rows[1], []string{"2", ""}) {
		t.Fatalf("rows %q, %v", rows, err)
	}
	_, err = c.query(ctx, "SELECT * FROM nope")
	if pe, ok := err.(*pgError); !ok || pe.Code != "42P01" || pe.Severity != "ERROR" {
		t.Fatalf("error %v; want the server's 42P01", err)
	}
	if rows, err := c.query(ctx, "SELECT 1"); err != nil || len(rows) != 2 {
		t.Fatalf("after a refused query: %q, %v", rows, err)
	}
	c.close()
	if _, err := pgConnect(ctx, ln.Addr().String(), "postgres", "postgres"); err == nil || !bytes.Contains([]byte(err.Error()), []byte("method 10")) {
		t.Errorf("a server asking for SASL: %v", err)
	}
}

func TestParseDataRowBounds(t *testing.T) {
	for _, p := range [][]byte{nil, {0}, {0, 1}, {0, 1, 0, 0, 0, 9, 'a'}} {
		if _, err := parseDataRow(p); err == nil {
			t.Errorf("parseDataRow(%v) accepted a broken row", p)
		}
	}
}
