package mcpserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The token is checked before the body is read: a request without a valid
// one is answered from its headers alone, however large the body it
// announces, and while the client is still sending it.
func TestGuardAnswersBeforeReadingTheBody(t *testing.T) {
	g := DefaultGuardConfig()
	g.MaxBodyBytes = 64 << 10
	e := newEnv(t, g)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	for _, tt := range []struct {
		name      string
		auth      string
		announced int64
		code      int
		text      string
	}{
		{"no token, body under the limit", "", g.MaxBodyBytes / 2, 401, "no bearer token"},
		{"no token, body over the limit", "", 10 << 20, 401, "no bearer token"},
		{"wrong token", "Bearer gc_wrong", g.MaxBodyBytes / 2, 401, "unknown or revoked token"},
		{"valid token, body over the limit", "Bearer " + e.token, 10 << 20, 413, "over the limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", addr, tt.announced)
			if tt.auth != "" {
				head += "Authorization: " + tt.auth + "\r\n"
			}
			// The headers and the first kilobyte of the body; the rest never
			// comes, so an answer proves the server did not wait for it.
			if _, err := io.WriteString(conn, head+"\r\n"+`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`+strings.Repeat("a", 1000)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // on failure, do not wait for ever
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v; want %d from the headers alone", err, tt.code)
			}
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.code || !strings.Contains(string(b), tt.text) {
				t.Fatalf("got %d %q; want %d with %q", res.StatusCode, b, tt.code, tt.text)
			}
		})
	}
}
