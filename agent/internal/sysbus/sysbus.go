// Package sysbus is the little of D-Bus the agent speaks: it connects to a
// bus over a Unix socket, authenticates as its user and calls methods whose
// arguments are strings and lists of strings, decoding replies of the basic
// types, structs, arrays and variants. It replaces github.com/godbus/dbus,
// whose code took more than a quarter of a megabyte of the agent's binary,
// and so of its resident memory, to ask systemd for its failed units.
package sysbus

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Error is an error reply: Name is the D-Bus error name, such as
// org.freedesktop.DBus.Error.UnknownMethod.
type Error struct {
	Name string
	Body []any
}

func (e *Error) Error() string {
	if len(e.Body) > 0 {
		if s, ok := e.Body[0].(string); ok {
			return s
		}
	}
	return e.Name
}

// ObjectPath is a decoded o.
type ObjectPath string

// Conn is a connection to a bus. It is not safe for concurrent calls.
type Conn struct {
	c      net.Conn
	r      *bufio.Reader
	serial uint32
	stop   func() bool
}

// SystemBusAddress is the system bus's address: DBUS_SYSTEM_BUS_ADDRESS,
// else the first of the usual sockets that exists.
func SystemBusAddress() (string, error) {
	if a := os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	for _, p := range []string{"/var/run/dbus/system_bus_socket", "/run/dbus/system_bus_socket"} {
		if _, err := os.Stat(p); err == nil {
			return "unix:path=" + p, nil
		}
	}
	return "", errors.New("system bus not found")
}

// Connect connects to the first address of the ;-separated list that takes
// the connection (unix:path= or unix:abstract=), authenticates and says
// Hello. ctx bounds the connection's whole life: when it ends, the
// connection is closed.
func Connect(ctx context.Context, address string) (*Conn, error) {
	var errs []error
	for _, a := range strings.Split(address, ";") {
		if a == "" {
			continue
		}
		c, err := connect(ctx, a)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("bus address %q: no address", address)
	}
	return nil, errors.Join(errs...)
}

func connect(ctx context.Context, address string) (*Conn, error) {
	path, err := socketPath(address)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	c := &Conn{c: nc, r: bufio.NewReader(nc)}
	c.stop = context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	if err := c.auth(); err != nil {
		c.Close()
		return nil, fmt.Errorf("bus %s: authenticate: %w", address, err)
	}
	if _, err := c.Call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"); err != nil {
		c.Close()
		return nil, fmt.Errorf("bus %s: hello: %w", address, err)
	}
	return c, nil
}

// socketPath reads unix:path=… or unix:abstract=… (other keys, such as
// guid, are ignored), unescaping %XX.
func socketPath(address string) (string, error) {
	transport, params, ok := strings.Cut(address, ":")
	if !ok || transport != "unix" {
		return "", fmt.Errorf("bus address %q: only unix: addresses are supported", address)
	}
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(kv, "=")
		v, err := unescapeAddress(v)
		if err != nil {
			return "", fmt.Errorf("bus address %q: %w", address, err)
		}
		switch k {
		case "path":
			return v, nil
		case "abstract":
			return "@" + v, nil
		}
	}
	return "", fmt.Errorf("bus address %q: no path= or abstract=", address)
}

func unescapeAddress(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("bad escape in %q", v)
		}
		x, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", v)
		}
		b.WriteByte(byte(x))
		i += 2
	}
	return b.String(), nil
}

// auth runs SASL EXTERNAL: the bus knows the peer's uid from the socket.
func (c *Conn) auth() error {
	uid := hex.EncodeToString([]byte(strconv.Itoa(os.Getuid())))
	if _, err := io.WriteString(c.c, "\x00AUTH EXTERNAL "+uid+"\r\n"); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "OK ") {
		return fmt.Errorf("refused: %q", strings.TrimSpace(line))
	}
	_, err = io.WriteString(c.c, "BEGIN\r\n")
	return err
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.stop()
	return c.c.Close()
}

// Message types and header fields of the D-Bus specification.
const (
	typeMethodCall   = 1
	typeMethodReturn = 2
	typeError        = 3

	fieldPath        = 1
	fieldInterface   = 2
	fieldMember      = 3
	fieldErrorName   = 4
	fieldReplySerial = 5
	fieldDestination = 6
	fieldSignature   = 8

	maxMessage = 128 << 20 // the specification's limit
)

// Call calls a method and returns the reply's body. Arguments may be
// string or []string; an error reply is an *Error.
func (c *Conn) Call(dest, path, iface, member string, args ...any) ([]any, error) {
	var body encoder
	sig := ""
	for _, a := range args {
		switch a := a.(type) {
		case string:
			sig += "s"
			body.str(a)
		case []string:
			sig += "as"
			body.strings(a)
		default:
			return nil, fmt.Errorf("argument of type %T is not supported", a)
		}
	}
	c.serial++
	serial := c.serial
	var h encoder
	h.b = append(h.b, 'l', typeMethodCall, 0, 1)
	h.u32(uint32(len(body.b)))
	h.u32(serial)
	h.fields(func(e *encoder) {
		e.field(fieldPath, "o", path)
		e.field(fieldInterface, "s", iface)
		e.field(fieldMember, "s", member)
		e.field(fieldDestination, "s", dest)
		if sig != "" {
			e.field(fieldSignature, "g", sig)
		}
	})
	h.align(8)
	if _, err := c.c.Write(append(h.b, body.b...)); err != nil {
		return nil, err
	}
	for {
		m, err := c.read()
		if err != nil {
			return nil, err
		}
		if m.replySerial != serial || m.typ != typeMethodReturn && m.typ != typeError {
			continue // a signal (NameAcquired after Hello) or another reply
		}
		body, err := decodeBody(m.order, m.body, m.signature)
		if err != nil {
			return nil, fmt.Errorf("%s.%s reply: %w", iface, member, err)
		}
		if m.typ == typeError {
			return nil, &Error{Name: m.errorName, Body: body}
		}
		return body, nil
	}
}

type message struct {
	order       binary.ByteOrder
	typ         byte
	replySerial uint32
	errorName   string
	signature   string
	body        []byte
}

func (c *Conn) read() (*message, error) {
	var fixed [16]byte
	if _, err := io.ReadFull(c.r, fixed[:]); err != nil {
		return nil, err
	}
	m := &message{typ: fixed[1]}
	switch fixed[0] {
	case 'l':
		m.order = binary.LittleEndian
	case 'B':
		m.order = binary.BigEndian
	default:
		return nil, fmt.Errorf("bad byte order %q", fixed[0])
	}
	bodyLen, fieldsLen := m.order.Uint32(fixed[4:]), m.order.Uint32(fixed[12:])
	headerLen := 16 + uint64(fieldsLen)
	headerLen += (8 - headerLen%8) % 8
	if headerLen+uint64(bodyLen) > maxMessage {
		return nil, errors.New("message too long")
	}
	rest := make([]byte, headerLen-16+uint64(bodyLen))
	if _, err := io.ReadFull(c.r, rest); err != nil {
		return nil, err
	}
	// The fields are decoded as the array a(yv) they are, from offset 12.
	whole := append(fixed[:], rest[:headerLen-16]...)
	d := decoder{order: m.order, b: whole, off: 12}
	fields, err := d.value("a(yv)")
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	for _, f := range fields.([]any) {
		kv := f.([]any)
		v := kv[1].(Variant).Value
		switch kv[0].(byte) {
		case fieldReplySerial:
			m.replySerial, _ = v.(uint32)
		case fieldErrorName:
			m.errorName, _ = v.(string)
		case fieldSignature:
			s, _ := v.(Signature)
			m.signature = string(s)
		}
	}
	m.body = rest[headerLen-16:]
	return m, nil
}

// Variant is a decoded v: its signature and value.
type Variant struct {
	Signature string
	Value     any
}

// Signature is a decoded g.
type Signature string

type encoder struct{ b []byte }

func (e *encoder) align(n int) {
	for len(e.b)%n != 0 {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) u32(v uint32) {
	e.align(4)
	e.b = binary.LittleEndian.AppendUint32(e.b, v)
}

func (e *encoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
}

func (e *encoder) sig(s string) {
	e.b = append(e.b, byte(len(s)))
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
}

func (e *encoder) strings(ss []string) {
	e.u32(0)
	at := len(e.b) - 4
	start := len(e.b) // strings align to 4, as the length did
	for _, s := range ss {
		e.str(s)
	}
	binary.LittleEndian.PutUint32(e.b[at:], uint32(len(e.b)-start))
}

// fields writes the header's a(yv) with fill's fields.
func (e *encoder) fields(fill func(*encoder)) {
	e.u32(0)
	at := len(e.b) - 4
	e.align(8)
	start := len(e.b)
	fill(e)
	binary.LittleEndian.PutUint32(e.b[at:], uint32(len(e.b)-start))
}

func (e *encoder) field(code byte, sig, v string) {
	e.align(8)
	e.b = append(e.b, code)
	e.sig(sig)
	if sig == "g" {
		e.sig(v)
	} else {
		e.str(v)
	}
}

// decodeBody decodes a body of the given signature.
func decodeBody(order binary.ByteOrder, b []byte, sig string) ([]any, error) {
	d := decoder{order: order, b: b}
	return d.values(sig)
}

// values decodes one value of each complete type in sig.
func (d *decoder) values(sig string) ([]any, error) {
	var out []any
	for sig != "" {
		one, rest, err := splitType(sig)
		if err != nil {
			return nil, err
		}
		v, err := d.value(one)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		sig = rest
	}
	return out, nil
}

// splitType returns the first complete type of sig and the rest.
func splitType(sig string) (string, string, error) {
	if sig == "" {
		return "", "", errors.New("signature ends early")
	}
	switch sig[0] {
	case 'a':
		elem, rest, err := splitType(sig[1:])
		return "a" + elem, rest, err
	case '(', '{':
		closing := map[byte]byte{'(': ')', '{': '}'}[sig[0]]
		i := 1
		for i < len(sig) && sig[i] != closing {
			_, rest, err := splitType(sig[i:])
			if err != nil {
				return "", "", err
			}
			i = len(sig) - len(rest)
		}
		if i >= len(sig) {
			return "", "", fmt.Errorf("signature %q: unclosed %c", sig, sig[0])
		}
		return sig[:i+1], sig[i+1:], nil
	}
	if !strings.ContainsRune("ybnqiuxtdsogvh", rune(sig[0])) {
		return "", "", fmt.Errorf("signature %q: unknown type %q", sig, sig[0])
	}
	return sig[:1], sig[1:], nil
}

type decoder struct {
	order binary.ByteOrder
	b     []byte
	off   int
	depth int
}

var errShort = errors.New("message ends early")

func (d *decoder) align(n int) error {
	off := (d.off + n - 1) / n * n
	if off > len(d.b) {
		return errShort
	}
	d.off = off
	return nil
}

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.off {
		return nil, errShort
	}
	b := d.b[d.off : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) fixed(n int) ([]byte, error) {
	if err := d.align(n); err != nil {
		return nil, err
	}
	return d.take(n)
}

func (d *decoder) text(lenBytes int) (string, error) {
	var n int
	if lenBytes == 1 {
		b, err := d.take(1)
		if err != nil {
			return "", err
		}
		n = int(b[0])
	} else {
		b, err := d.fixed(4)
		if err != nil {
			return "", err
		}
		n = int(d.order.Uint32(b))
	}
	b, err := d.take(n + 1) // and its terminating NUL
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// value decodes one value of the complete type sig.
func (d *decoder) value(sig string) (any, error) {
	if d.depth > 64 {
		return nil, errors.New("values nested too deep")
	}
	d.depth++
	defer func() { d.depth-- }()
	switch sig[0] {
	case 'y':
		b, err := d.take(1)
		if err != nil {
			return nil, err
		}
		return b[0], nil
	case 'n', 'q':
		b, err := d.fixed(2)
		if err != nil {
			return nil, err
		}
		if sig[0] == 'n' {
			return int16(d.order.Uint16(b)), nil
		}
		return d.order.Uint16(b), nil
	case 'b', 'i', 'u', 'h':
		b, err := d.fixed(4)
		if err != nil {
			return nil, err
		}
		v := d.order.Uint32(b)
		switch sig[0] {
		case 'b':
			return v != 0, nil
		case 'i':
			return int32(v), nil
		}
		return v, nil
	case 'x', 't', 'd':
		b, err := d.fixed(8)
		if err != nil {
			return nil, err
		}
		v := d.order.Uint64(b)
		switch sig[0] {
		case 'x':
			return int64(v), nil
		case 'd':
			return math.Float64frombits(v), nil
		}
		return v, nil
	case 's':
		return d.text(4)
	case 'o':
		s, err := d.text(4)
		return ObjectPath(s), err
	case 'g':
		s, err := d.text(1)
		return Signature(s), err
	case 'v':
		s, err := d.text(1)
		if err != nil {
			return nil, err
		}
		one, rest, err := splitType(s)
		if err != nil || rest != "" {
			return nil, fmt.Errorf("variant signature %q", s)
		}
		v, err := d.value(one)
		return Variant{Signature: s, Value: v}, err
	case 'a':
		b, err := d.fixed(4)
		if err != nil {
			return nil, err
		}
		n := int(d.order.Uint32(b))
		// Elements align to their own type even when there are none.
		if err := d.align(alignment(sig[1])); err != nil {
			return nil, err
		}
		if n > len(d.b)-d.off {
			return nil, errShort
		}
		end := d.off + n
		out := []any{}
		for d.off < end {
			at := d.off
			v, err := d.value(sig[1:])
			if err != nil {
				return nil, err
			}
			if d.off == at {
				return nil, errors.New("array of empty elements")
			}
			out = append(out, v)
		}
		if d.off != end {
			return nil, errors.New("array longer than its length")
		}
		return out, nil
	case '(', '{':
		if err := d.align(8); err != nil {
			return nil, err
		}
		return d.values(sig[1 : len(sig)-1])
	}
	return nil, fmt.Errorf("unknown type %q", sig[0])
}

func alignment(t byte) int {
	switch t {
	case 'n', 'q':
		return 2
	case 'b', 'i', 'u', 'h', 's', 'o', 'a':
		return 4
	case 'x', 't', 'd', '(', '{':
		return 8
	}
	return 1
}
