package gridcityv1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CoordinatorServerName is the DNS name in the coordinator's server
// certificate. Agents verify the coordinator against the pinned CA and this
// name, whatever address they dial (an IP, a NAT address, a proxy).
const CoordinatorServerName = "coordinator.gridcity.internal"

// JoinLine is what `gridcity join` prints and `gridcity-agent run --join`
// takes: where the coordinator is, a join token, and the pin of its CA.
//
// Its text form, gridcity://HOST:PORT/TOKEN/sha256:HEX, has no characters a
// shell treats specially, so it survives copy and paste into a terminal.
type JoinLine struct {
	Coordinator string // host:port of the coordinator's gRPC listener
	Token       string
	CAPin       string // "sha256:" + 64 hex digits
}

func (j JoinLine) String() string {
	return "gridcity://" + j.Coordinator + "/" + j.Token + "/" + j.CAPin
}

// ParseJoinLine parses and checks a join line.
func ParseJoinLine(s string) (JoinLine, error) {
	s = strings.TrimSpace(s)
	const hint = "a join line looks like gridcity://HOST:4601/TOKEN/sha256:HEX; `gridcity join` prints one"
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "gridcity" || u.Host == "" {
		return JoinLine{}, fmt.Errorf("join line %q is not valid: %s", shorten(s), hint)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return JoinLine{}, fmt.Errorf("join line names coordinator %q without a port: %s", shorten(u.Host), hint)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" {
		return JoinLine{}, fmt.Errorf("join line %q lacks the token or the CA pin: %s", shorten(s), hint)
	}
	j := JoinLine{Coordinator: u.Host, Token: parts[0], CAPin: parts[1]}
	if err := CheckPin(j.CAPin); err != nil {
		return JoinLine{}, fmt.Errorf("join line: %w", err)
	}
	return j, nil
}

// CheckPin checks the form of a CA pin.
func CheckPin(pin string) error {
	h, ok := strings.CutPrefix(pin, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != sha256.Size {
		return fmt.Errorf("CA pin %q is not sha256: followed by 64 hex digits", shorten(pin))
	}
	return nil
}

// PinOf is the pin of a DER certificate.
func PinOf(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// shorten keeps error messages readable and free of a full token.
func shorten(s string) string {
	if len(s) > 48 {
		return s[:40] + "…"
	}
	return s
}
