package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
)

// maxRESPLine bounds the one reply line read; PONG and the error lines are far shorter.
const maxRESPLine = 512

// probeRedis sends PING and reads the reply line: +PONG is up, -NOAUTH is up behind a
// password, -LOADING and other errors are not ready.
func probeRedis(ctx context.Context, target string) Result {
	c, err := dial(ctx, target, "6379")
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return fail(err)
	}
	line, err := readRESPLine(bufio.NewReaderSize(c, maxRESPLine))
	if err != nil {
		return fail(err)
	}
	res := judgeRESP(line)
	if res.OK {
		c.Write([]byte("*1\r\n$4\r\nQUIT\r\n")) // leave politely
	}
	return res
}

// readRESPLine reads one line of at most maxRESPLine bytes, without its CRLF.
func readRESPLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("redis reply: line longer than %d bytes", maxRESPLine)
	}
	if err != nil {
		return nil, fmt.Errorf("read redis reply: %w", err)
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// judgeRESP judges the reply to PING.
func judgeRESP(line []byte) Result {
	if len(line) == 0 {
		return Result{Reason: "redis: empty reply to PING"}
	}
	body := string(line[1:])
	switch line[0] {
	case '+':
		if body == "PONG" {
			return Result{OK: true, Metrics: map[string]float64{"auth_required": 0}}
		}
		return Result{Reason: fmt.Sprintf("redis: unexpected reply to PING: %q", body)}
	case '-':
		if hasWord(body, "NOAUTH") || hasWord(body, "WRONGPASS") {
			return Result{OK: true, Metrics: map[string]float64{"auth_required": 1}}
		}
		return Result{Reason: "redis: " + body} // LOADING, MASTERDOWN, BUSY, DENIED (protected mode) …
	default:
		return Result{Reason: fmt.Sprintf("redis: not a RESP reply to PING: %q", line)}
	}
}

// hasWord reports whether s starts with the error code w (RESP errors start with a code word).
func hasWord(s, w string) bool {
	return len(s) >= len(w) && s[:len(w)] == w && (len(s) == len(w) || s[len(w)] == ' ')
}
