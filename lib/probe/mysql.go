package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxMySQLPacket bounds the first packet: a handshake is about 100 bytes, an ERR packet a line.
const maxMySQLPacket = 4 << 10

// probeMySQL reads the greeting MySQL and MariaDB send on connect: a protocol 10 handshake is
// up; an ERR packet (too many connections, host blocked) is not.
func probeMySQL(ctx context.Context, target string) Result {
	c, err := dial(ctx, target, "3306")
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	payload, err := readMySQLPacket(c)
	if err != nil {
		return fail(err)
	}
	res, err := judgeMySQL(payload)
	if err != nil {
		return fail(err)
	}
	return res
}

// readMySQLPacket reads one packet: a 3-byte little-endian length, a sequence byte, a payload.
func readMySQLPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("read mysql packet header: %w", err)
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n == 0 || n > maxMySQLPacket {
		return nil, fmt.Errorf("mysql packet: length %d out of range [1, %d]", n, maxMySQLPacket)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("read mysql packet: %w", err)
	}
	return p, nil
}

// judgeMySQL judges the first packet: a handshake (protocol 10) or an ERR packet (0xff).
func judgeMySQL(p []byte) (Result, error) {
	if len(p) == 0 {
		return Result{}, errors.New("mysql: empty packet")
	}
	switch p[0] {
	case 0xff:
		if len(p) < 3 {
			return Result{}, fmt.Errorf("mysql error packet: %d bytes, want at least 3", len(p))
		}
		code := binary.LittleEndian.Uint16(p[1:3])
		msg := p[3:]
		state := ""
		if len(msg) >= 6 && msg[0] == '#' {
			state, msg = string(msg[1:6]), msg[6:]
		}
		reason := fmt.Sprintf("ERROR %d", code)
		if state != "" {
			reason += " (" + state + ")"
		}
		return Result{Reason: reason + ": " + string(msg)}, nil
	case 10:
		// version NUL, connection id (4), auth data (8), filler, capabilities … only the first
		// two matter here, and both must be present.
		end := -1
		for i, b := range p[1:] {
			if b == 0 {
				end = 1 + i
				break
			}
		}
		if end < 0 {
			return Result{}, errors.New("mysql handshake: server version unterminated")
		}
		if len(p) < end+1+4 {
			return Result{}, fmt.Errorf("mysql handshake: %d bytes, too short for a connection id", len(p))
		}
		m := map[string]float64{"protocol_version": 10}
		if v, ok := mysqlVersionNum(string(p[1:end])); ok {
			m["server_version_num"] = v
		}
		return Result{OK: true, Metrics: m}, nil
	default:
		return Result{}, fmt.Errorf("mysql: unsupported protocol version %d in greeting", p[0])
	}
}

// mysqlVersionNum turns "8.0.36-0ubuntu0.22.04.1" or "5.5.5-10.11.6-MariaDB-0+deb12u1" into
// major*10000+minor*100+patch (80036, 101106), as a metric can hold no string.
func mysqlVersionNum(v string) (float64, bool) {
	v = strings.TrimPrefix(v, "5.5.5-") // MariaDB's prefix for old replication clients
	if i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
		v = v[:i]
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, false
	}
	num := 0.0
	for i, mul := range []float64{10000, 100, 1} {
		if i >= len(parts) {
			break
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || n > 99 {
			return 0, false
		}
		num += float64(n) * mul
	}
	return num, true
}
