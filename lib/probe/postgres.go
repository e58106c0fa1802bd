package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	pgProtocol3    = 3 << 16
	pgProbeUser    = "gridcity_probe"
	pgProbeDB      = "postgres"
	maxPGMessage   = 16 << 10 // an ErrorResponse with detail and hint fits many times over
	maxPGErrFields = 32
)

// probePostgres sends a StartupMessage without credentials and reads the first answer. Asking
// for a password, or refusing the probe's role (bad password, unknown role, no pg_hba.conf entry,
// unknown database), shows a server that runs and authenticates; "starting up", "shutting down",
// "too many clients" and the like do not.
func probePostgres(ctx context.Context, target string) Result {
	c, err := dial(ctx, target, "5432")
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	if _, err := c.Write(pgStartupMessage()); err != nil {
		return fail(err)
	}
	res, err := readPGAnswer(c)
	if err != nil {
		return fail(err)
	}
	c.Write([]byte{'X', 0, 0, 0, 4}) // Terminate: leave politely, so the server logs no EOF error
	return res
}

func pgStartupMessage() []byte {
	var body bytes.Buffer
	binary.Write(&body, binary.BigEndian, int32(pgProtocol3))
	for _, kv := range [][2]string{{"user", pgProbeUser}, {"database", pgProbeDB}, {"application_name", "gridcity-probe"}} {
		body.WriteString(kv[0])
		body.WriteByte(0)
		body.WriteString(kv[1])
		body.WriteByte(0)
	}
	body.WriteByte(0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(body.Len()+4))
	return append(msg, body.Bytes()...)
}

// readPGAnswer reads one backend message and judges it.
func readPGAnswer(r io.Reader) (Result, error) {
	typ, payload, err := readPGMessage(r)
	if err != nil {
		return Result{}, err
	}
	return judgePG(typ, payload)
}

// readPGMessage reads one backend message: a type byte, a length that counts itself, a payload.
func readPGMessage(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("read postgres message header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > maxPGMessage {
		return 0, nil, fmt.Errorf("postgres message %q: length %d out of range [4, %d]", hdr[0], n, maxPGMessage)
	}
	payload := make([]byte, n-4)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("read postgres message %q: %w", hdr[0], err)
	}
	return hdr[0], payload, nil
}

// judgePG turns the first answer to a startup into a Result.
func judgePG(typ byte, payload []byte) (Result, error) {
	switch typ {
	case 'R': // AuthenticationRequest: 0 is trust, anything else asks for credentials
		if len(payload) < 4 {
			return Result{}, fmt.Errorf("postgres authentication request: %d bytes, want at least 4", len(payload))
		}
		method := binary.BigEndian.Uint32(payload)
		m := map[string]float64{"auth_method": float64(method), "auth_required": 1}
		if method == 0 {
			m["auth_required"] = 0
		}
		return Result{OK: true, Metrics: m}, nil
	case 'v': // NegotiateProtocolVersion: a server that speaks the protocol
		return Result{OK: true}, nil
	case 'E':
		f, err := parsePGError(payload)
		if err != nil {
			return Result{}, err
		}
		code := f['C']
		switch {
		case strings.HasPrefix(code, "28"), strings.HasPrefix(code, "3D"):
			// 28000 no pg_hba.conf entry / role does not exist, 28P01 password
			// authentication failed, 3D000 database does not exist: it runs, and checks who asks.
			return Result{OK: true, Metrics: map[string]float64{"auth_required": 1}}, nil
		default:
			return Result{Reason: pgErrorText(f)}, nil
		}
	default:
		return Result{}, fmt.Errorf("postgres: unexpected message type %q in answer to startup", typ)
	}
}

// parsePGError reads ErrorResponse fields: a code byte and a NUL-terminated string each, a NUL
// at the end.
func parsePGError(p []byte) (map[byte]string, error) {
	f := map[byte]string{}
	for n := 0; ; n++ {
		if len(p) == 0 {
			return nil, errors.New("postgres error response: missing terminator")
		}
		if p[0] == 0 {
			break
		}
		if n >= maxPGErrFields {
			return nil, fmt.Errorf("postgres error response: more than %d fields", maxPGErrFields)
		}
		end := bytes.IndexByte(p[1:], 0)
		if end < 0 {
			return nil, fmt.Errorf("postgres error response: field %q unterminated", p[0])
		}
		f[p[0]] = string(p[1 : 1+end])
		p = p[1+end+1:]
	}
	if f['M'] == "" {
		return nil, errors.New("postgres error response without a message")
	}
	return f, nil
}

// pgErrorText reads as libpq and pgx print errors: "FATAL: the database system is starting up
// (SQLSTATE 57P03)".
func pgErrorText(f map[byte]string) string {
	sev := f['V']
	if sev == "" {
		sev = f['S']
	}
	s := f['M']
	if sev != "" {
		s = sev + ": " + s
	}
	if f['C'] != "" {
		s += " (SQLSTATE " + f['C'] + ")"
	}
	return s
}
