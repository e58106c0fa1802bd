package main

// A PostgreSQL client just big enough for the demo's API: protocol 3
// startup with trust authentication, and simple queries whose rows come
// back as text. No dependency: the coordinator module stays as it is.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const maxPGMessage = 1 << 20

// pgConn is one connection; not safe for concurrent use.
type pgConn struct {
	c net.Conn
	r *bufio.Reader
}

// pgError is an ErrorResponse from the server.
type pgError struct{ Severity, Code, Message string }

func (e *pgError) Error() string {
	return fmt.Sprintf("postgres %s %s: %s", e.Severity, e.Code, e.Message)
}

// pgConnect dials addr and starts a session as user on database; only
// trust authentication is spoken (the demo's pg_hba trusts its net).
func pgConnect(ctx context.Context, addr, user, database string) (*pgConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	pc := &pgConn{c: c, r: bufio.NewReader(c)}
	var body bytes.Buffer
	binary.Write(&body, binary.BigEndian, int32(3<<16))
	for _, kv := range [][2]string{{"user", user}, {"database", database}, {"application_name", "gridcity-fleet-app"}} {
		body.WriteString(kv[0] + "\x00" + kv[1] + "\x00")
	}
	body.WriteByte(0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(body.Len()+4))
	if _, err := c.Write(append(msg, body.Bytes()...)); err != nil {
		c.Close()
		return nil, err
	}
	for {
		typ, payload, err := pc.read()
		if err != nil {
			c.Close()
			return nil, err
		}
		switch typ {
		case 'R':
			if len(payload) < 4 {
				c.Close()
				return nil, errors.New("postgres: short authentication message")
			}
			if m := binary.BigEndian.Uint32(payload); m != 0 {
				c.Close()
				return nil, fmt.Errorf("postgres asks for authentication method %d; the demo's API speaks trust only", m)
			}
		case 'E':
			c.Close()
			return nil, parsePGError(payload)
		case 'Z':
			c.SetDeadline(time.Time{})
			return pc, nil
		}
		// S (parameter status), K (backend key), N (notice): not needed.
	}
}

// query runs sql (one or more statements) and returns the rows of the last
// statement that returned any, as text.
func (pc *pgConn) query(ctx context.Context, sql string) ([][]string, error) {
	if dl, ok := ctx.Deadline(); ok {
		pc.c.SetDeadline(dl)
		defer pc.c.SetDeadline(time.Time{})
	}
	msg := []byte{'Q'}
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(sql)+5))
	msg = append(append(msg, sql...), 0)
	if _, err := pc.c.Write(msg); err != nil {
		return nil, err
	}
	var rows [][]string
	var qerr error
	for {
		typ, payload, err := pc.read()
		if err != nil {
			return nil, err
		}
		switch typ {
		case 'T':
			rows = nil
		case 'D':
			row, err := parseDataRow(payload)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		case 'E':
			qerr = parsePGError(payload)
		case 'Z':
			return rows, qerr
		}
	}
}

func (pc *pgConn) close() {
	pc.c.Write([]byte{'X', 0, 0, 0, 4})
	pc.c.Close()
}

func (pc *pgConn) read() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(pc.r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("read from postgres: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > maxPGMessage {
		return 0, nil, fmt.Errorf("postgres message %q of length %d", hdr[0], n)
	}
	payload := make([]byte, n-4)
	if _, err := io.ReadFull(pc.r, payload); err != nil {
		return 0, nil, fmt.Errorf("read from postgres: %w", err)
	}
	return hdr[0], payload, nil
}

func parseDataRow(p []byte) ([]string, error) {
	if len(p) < 2 {
		return nil, errors.New("postgres: short data row")
	}
	n := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	row := make([]string, 0, n)
	for range n {
		if len(p) < 4 {
			return nil, errors.New("postgres: short data row")
		}
		l := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		if l < 0 {
			row = append(row, "")
			continue
		}
		if int(l) > len(p) {
			return nil, errors.New("postgres: data row field past its end")
		}
		row = append(row, string(p[:l]))
		p = p[l:]
	}
	return row, nil
}

func parsePGError(p []byte) error {
	e := &pgError{}
	for len(p) > 1 {
		code := p[0]
		end := bytes.IndexByte(p[1:], 0)
		if end < 0 {
			break
		}
		v := string(p[1 : 1+end])
		switch code {
		case 'S':
			e.Severity = v
		case 'C':
			e.Code = v
		case 'M':
			e.Message = v
		}
		p = p[2+end:]
	}
	return e
}
