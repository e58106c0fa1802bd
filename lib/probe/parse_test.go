package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// pgMsg builds a backend message.
func pgMsg(typ byte, payload []byte) []byte {
	b := []byte{typ}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)+4))
	return append(b, payload...)
}

// pgErr builds an ErrorResponse as PostgreSQL 15 sends it.
func pgErr(code, msg string) []byte {
	var p []byte
	for _, f := range []struct {
		c byte
		v string
	}{{'S', "FATAL"}, {'V', "FATAL"}, {'C', code}, {'M', msg}, {'F', "postmaster.c"}, {'L', "2428"}, {'R', "ProcessStartupPacket"}} {
		p = append(append(append(p, f.c), f.v...), 0)
	}
	return pgMsg('E', append(p, 0))
}

func TestJudgePostgres(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		ok     bool
		reason string
		auth   float64
	}{
		{"scram", pgMsg('R', append([]byte{0, 0, 0, 10}, "SCRAM-SHA-256\x00\x00"...)), true, "", 1},
		{"md5", pgMsg('R', []byte{0, 0, 0, 5, 1, 2, 3, 4}), true, "", 1},
		{"trust", pgMsg('R', []byte{0, 0, 0, 0}), true, "", 0},
		{"password failed", pgErr("28P01", `password authentication failed for user "gridcity_probe"`), true, "", 1},
		{"no role", pgErr("28000", `role "gridcity_probe" does not exist`), true, "", 1},
		{"no hba", pgErr("28000", `no pg_hba.conf entry for host "10.0.4.7", user "gridcity_probe", database "postgres", no encryption`), true, "", 1},
		{"no database", pgErr("3D000", `database "postgres" does not exist`), true, "", 1},
		{"starting", pgErr("57P03", "the database system is starting up"), false, "FATAL: the database system is starting up (SQLSTATE 57P03)", 0},
		{"shutting down", pgErr("57P03", "the database system is shutting down"), false, "FATAL: the database system is shutting down (SQLSTATE 57P03)", 0},
		{"too many", pgErr("53300", "sorry, too many clients already"), false, "FATAL: sorry, too many clients already (SQLSTATE 53300)", 0},
	}
	for _, tt := range tests {
		r, err := readPGAnswer(bytes.NewReader(tt.in))
		if err != nil || r.OK != tt.ok || r.Reason != tt.reason || r.Metrics["auth_required"] != tt.auth {
			t.Errorf("%s: %+v, %v; want OK %v, reason %q, auth_required %v", tt.name, r, err, tt.ok, tt.reason, tt.auth)
		}
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"short length": {'R', 0, 0, 0, 3},
		"huge length":  {'E', 0x7f, 0xff, 0xff, 0xff},
		"cut payload":  {'R', 0, 0, 0, 8, 0, 0},
		"short auth":   pgMsg('R', []byte{0, 0}),
		"unterminated": pgMsg('E', []byte("SFATAL")),
		"no message":   pgMsg('E', []byte("C57P03\x00\x00")),
		"other type":   pgMsg('Z', []byte{'I'}),
	} {
		if r, err := readPGAnswer(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: %+v; want an error", name, r)
		}
	}
}

// TestPostgresStartingUp: a fake server answering as PostgreSQL does during recovery.
func TestPostgresStartingUp(t *testing.T) {
	got := make(chan []byte, 1)
	addr := fakeServer(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 512)
		n, _ := c.Read(buf)
		got <- buf[:n]
		c.Write(pgErr("57P03", "the database system is starting up"))
	})
	r := Run(context.Background(), Spec{Engine: "postgres", Target: addr, Timeout: 2 * time.Second})
	if r.OK || r.Reason != "FATAL: the database system is starting up (SQLSTATE 57P03)" {
		t.Errorf("postgres starting up: %+v; want a failure with the server's message", r)
	}
	startup := <-got
	if !bytes.Contains(startup, []byte("user\x00gridcity_probe\x00database\x00postgres\x00")) ||
		binary.BigEndian.Uint32(startup) != uint32(len(startup)) || binary.BigEndian.Uint32(startup[4:]) != 196608 {
		t.Errorf("startup message %q; want protocol 3.0, user gridcity_probe, database postgres, and its own length", startup)
	}
}

func FuzzPostgresMessage(f *testing.F) {
	f.Add(pgMsg('R', []byte{0, 0, 0, 10}))
	f.Add(pgErr("57P03", "the database system is starting up"))
	f.Add(pgErr("28P01", "password authentication failed"))
	f.Add([]byte{'E', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := readPGAnswer(bytes.NewReader(data))
		if err == nil && r.OK && r.Reason != "" {
			t.Errorf("OK with a reason: %+v", r)
		}
	})
}

func TestJudgeRESP(t *testing.T) {
	tests := []struct {
		in     string
		ok     bool
		auth   float64
		reason string
	}{
		{"+PONG\r\n", true, 0, ""},
		{"-NOAUTH Authentication required.\r\n", true, 1, ""},
		{"-WRONGPASS invalid username-password pair or user is disabled.\r\n", true, 1, ""},
		{"-LOADING Redis is loading the dataset in memory\r\n", false, 0, "redis: LOADING Redis is loading the dataset in memory"},
		{"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n", false, 0, "redis: MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."},
		{"-NOAUTHX\r\n", false, 0, "redis: NOAUTHX"},
		{"+OK\r\n", false, 0, `redis: unexpected reply to PING: "OK"`},
		{"$4\r\n", false, 0, `redis: not a RESP reply to PING: "$4"`},
		{"\r\n", false, 0, "redis: empty reply to PING"},
	}
	for _, tt := range tests {
		line, err := readRESPLine(bufio.NewReaderSize(strings.NewReader(tt.in), maxRESPLine))
		if err != nil {
			t.Fatalf("readRESPLine(%q): %v", tt.in, err)
		}
		r := judgeRESP(line)
		if r.OK != tt.ok || r.Metrics["auth_required"] != tt.auth || r.Reason != tt.reason {
			t.Errorf("judgeRESP(%q) = %+v; want OK %v, auth_required %v, reason %q", tt.in, r, tt.ok, tt.auth, tt.reason)
		}
	}
	for _, in := range []string{"", "+PONG", strings.Repeat("+", maxRESPLine+1) + "\r\n"} {
		if line, err := readRESPLine(bufio.NewReaderSize(strings.NewReader(in), maxRESPLine)); err == nil {
			t.Errorf("readRESPLine(%.20q) = %q; want an error (no line end, or too long)", in, line)
		}
	}
}

func FuzzRESPLine(f *testing.F) {
	for _, s := range []string{"+PONG\r\n", "-NOAUTH Authentication required.\r\n", "-LOADING x\r\n", "\r\n", "-\n", "+"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		line, err := readRESPLine(bufio.NewReaderSize(bytes.NewReader(data), maxRESPLine))
		if err != nil {
			return
		}
		if len(line) > maxRESPLine {
			t.Errorf("line of %d bytes; want at most %d", len(line), maxRESPLine)
		}
		if r := judgeRESP(line); r.OK == (r.Reason != "") {
			t.Errorf("judgeRESP(%q) = %+v; want a reason exactly when not OK", line, r)
		}
	})
}

// mysqlPacket frames a payload with sequence number 0.
func mysqlPacket(p []byte) []byte {
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 0}, p...)
}

// mariadbGreeting is the start of the greeting MariaDB 10.11 from Debian 12 sends.
var mariadbGreeting = mysqlPacket(append([]byte("\x0a5.5.5-10.11.6-MariaDB-0+deb12u1\x00\x2a\x00\x00\x00"),
	"abcdefgh\x00\xfe\xf7\x2d\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00ijklmnopqrst\x00mysql_native_password\x00"...))

func TestJudgeMySQL(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		ok      bool
		version float64
		reason  string
	}{
		{"mariadb", mariadbGreeting, true, 101106, ""},
		{"mysql 8", mysqlPacket([]byte("\x0a8.0.36-0ubuntu0.22.04.1\x00\x08\x00\x00\x00")), true, 80036, ""},
		{"too many", mysqlPacket([]byte("\xff\x10\x04Too many connections")), false, 0, "ERROR 1040: Too many connections"},
		{"blocked", mysqlPacket([]byte("\xff\x69\x04#HY000Host '10.0.4.7' is blocked because of many connection errors")), false, 0, "ERROR 1129 (HY000): Host '10.0.4.7' is blocked because of many connection errors"},
	}
	for _, tt := range tests {
		p, err := readMySQLPacket(bytes.NewReader(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		r, err := judgeMySQL(p)
		if err != nil || r.OK != tt.ok || r.Metrics["server_version_num"] != tt.version || r.Reason != tt.reason {
			t.Errorf("%s: %+v, %v; want OK %v, server_version_num %v, reason %q", tt.name, r, err, tt.ok, tt.version, tt.reason)
		}
		if tt.ok && r.Metrics["protocol_version"] != 10 {
			t.Errorf("%s: protocol_version %v; want 10", tt.name, r.Metrics["protocol_version"])
		}
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"zero length":  {0, 0, 0, 0},
		"huge length":  {0xff, 0xff, 0xff, 0},
		"cut":          {10, 0, 0, 0, 10, '8'},
		"unterminated": mysqlPacket([]byte("\x0a8.0.36")),
		"no conn id":   mysqlPacket([]byte("\x0a8.0.36\x00\x01")),
		"short err":    mysqlPacket([]byte("\xff\x10")),
		"protocol 9":   mysqlPacket([]byte("\x093.22\x00\x01\x00\x00\x00")),
	} {
		p, err := readMySQLPacket(bytes.NewReader(in))
		if err != nil {
			continue
		}
		if r, err := judgeMySQL(p); err == nil {
			t.Errorf("%s: %+v; want an error", name, r)
		}
	}
}

func TestMySQLFakeServer(t *testing.T) {
	addr := fakeServer(t, func(c net.Conn) { c.Write(mariadbGreeting) })
	r := Run(context.Background(), Spec{Engine: "mysql", Target: addr, Timeout: 2 * time.Second})
	if !r.OK || r.Metrics["server_version_num"] != 101106 {
		t.Errorf("mysql greeting from a fake MariaDB: %+v; want OK with server_version_num 101106", r)
	}
}

func FuzzMySQLHandshake(f *testing.F) {
	f.Add(mariadbGreeting)
	f.Add(mysqlPacket([]byte("\xff\x10\x04#08004Too many connections")))
	f.Add([]byte{0xff, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := readMySQLPacket(bytes.NewReader(data))
		if err != nil {
			return
		}
		if r, err := judgeMySQL(p); err == nil && r.OK == (r.Reason != "") {
			t.Errorf("judgeMySQL(%q) = %+v; want a reason exactly when not OK", p, r)
		}
	})
}
