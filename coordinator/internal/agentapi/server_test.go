package agentapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/statecheck"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

type harness struct {
	t     *testing.T
	st    store.Store
	ca    *pki.CA
	fleet *fleet.Fleet
	api   *Server
	addr  string
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	unseal, err := sealing.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ca, err := pki.LoadOrCreate(ctx, st, unseal, logger)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	api := New(cfg, st, ca, f, logger)
	gs, err := api.GRPCServer(Sinks{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	return &harness{t: t, st: st, ca: ca, fleet: f, api: api, addr: l.Addr().String()}
}

func (h *harness) joinToken(ttl time.Duration, single bool) string {
	h.t.Helper()
	tok := "tok-" + h.t.Name() + time.Now().String()
	now := time.Now()
	if err := h.st.CreateJoinToken(context.Background(), store.JoinToken{Hash: HashToken(tok), CreatedAt: now, ExpiresAt: now.Add(ttl), SingleUse: single}); err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// dial connects with the CA pinned, optionally presenting a client certificate.
func (h *harness) dial(cert *tls.Certificate, opts ...grpc.DialOption) *grpc.ClientConn {
	h.t.Helper()
	cfg := &tls.Config{RootCAs: h.ca.Pool(), ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(h.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, opts...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return conn
}

// enroll runs an enrollment and returns the client certificate, or the error.
func (h *harness) enroll(token, name string) (*tls.Certificate, error) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return h.enrollWith(key, token, name)
}

// enrollWith is enroll with the agent's key given.
func (h *harness) enrollWith(key *ecdsa.PrivateKey, token, name string) (*tls.Certificate, error) {
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	resp, err := gridcityv1.NewAgentServiceClient(h.dial(nil)).Enroll(context.Background(), &gridcityv1.EnrollRequest{JoinToken: token, Name: name, CsrDer: csr})
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{resp.CertificateDer}, PrivateKey: key}, nil
}

func (h *harness) mustEnroll(name string) *tls.Certificate {
	h.t.Helper()
	c, err := h.enroll(h.joinToken(time.Hour, true), name)
	if err != nil {
		h.t.Fatalf("enroll %s: %v", name, err)
	}
	return c
}

func wantCode(t *testing.T, err error, code codes.Code, text string) {
	t.Helper()
	s, _ := status.FromError(err)
	if s.Code() != code || !strings.Contains(s.Message(), text) {
		t.Fatalf("got %v; want code %v with %q", err, code, text)
	}
}

func TestEnrollRefusals(t *testing.T) {
	h := newHarness(t, nil)
	expired := h.joinToken(-time.Second, true)
	used := h.joinToken(time.Hour, true)
	if _, err := h.enroll(used, "web-1"); err != nil {
		t.Fatalf("first use: %v", err)
	}
	tests := []struct {
		name, token, server string
		code                codes.Code
		text                string
	}{
		{"unknown token", "no-such-token", "web-2", codes.Unauthenticated, "join token unknown"},
		{"expired token", expired, "web-2", codes.Unauthenticated, "join token expired"},
		{"reused token", used, "web-2", codes.Unauthenticated, "already used"},
		{"empty token", "", "web-2", codes.InvalidArgument, "without a join token"},
		{"name taken", h.joinToken(time.Hour, true), "web-1", codes.AlreadyExists, `"web-1" is already enrolled`},
		{"bad name", h.joinToken(time.Hour, true), "web 1;rm", codes.InvalidArgument, "server name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.enroll(tt.token, tt.server)
			wantCode(t, err, tt.code, tt.text)
		})
	}
	// A refused enrollment consumes nothing: the token refused for a taken
	// name still enrolls another name.
	tok := h.joinToken(time.Hour, true)
	if _, err := h.enroll(tok, "web-1"); err == nil {
		t.Fatal("taken name enrolled")
	}
	if _, err := h.enroll(tok, "web-3"); err != nil {
		t.Fatalf("token after a refused enrollment: %v", err)
	}
	agents, _ := h.st.Agents(context.Background())
	if len(agents) != 2 {
		t.Fatalf("got %d agents; want 2 (web-1, web-3)", len(agents))
	}
}

// An agent whose enrollment answer was lost asks again with the same key
// and token: it gets a new certificate, which connects, while the one it
// never received does not. The used token still refuses another key.
func TestEnrollAgainAfterALostAnswer(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.joinToken(time.Hour, true)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	lost, err := h.enrollWith(key, tok, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.enrollWith(key, tok, "web-1")
	if err != nil {
		t.Fatalf("the same agent asking again: %v; want a certificate", err)
	}
	s := connect(t, h.dial(got))
	s.Send(hello("web-1"))
	if m, err := s.Recv(); err != nil || m.GetSettings() == nil {
		t.Fatalf("the new certificate: %v, %v; want settings", m, err)
	}
	old := connect(t, h.dial(lost))
	old.Send(hello("web-1"))
	_, err = old.Recv()
	wantCode(t, err, codes.PermissionDenied, "replaced by a newer enrollment")

	_, err = h.enroll(tok, "web-1") // another key
	wantCode(t, err, codes.Unauthenticated, "already used")
	if agents, _ := h.st.Agents(context.Background()); len(agents) != 1 {
		t.Fatalf("agents %+v; want web-1 once", agents)
	}
}

func TestReusableTokenEnrollsSeveral(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.joinToken(time.Hour, false)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := h.enroll(tok, n); err != nil {
			t.Fatalf("enroll %s: %v", n, err)
		}
	}
}

func connect(t *testing.T, conn *grpc.ClientConn) grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := gridcityv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hello(name string) *gridcityv1.AgentMessage {
	return &gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Hello{Hello: &gridcityv1.Hello{Name: name, AgentVersion: "test"}}}
}

func TestStreamCarriesState(t *testing.T) {
	h := newHarness(t, nil)
	s := connect(t, h.dial(h.mustEnroll("web-1")))
	if err := s.Send(hello("web-1")); err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err != nil || m.GetSettings() == nil {
		t.Fatalf("got %v, %v; want settings first", m, err)
	}
	full := &gridcityv1.StateUpdate{Full: true, Host: &gridcityv1.HostInfo{Hostname: "web-1", Os: "debian"}, Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(12.5)}}
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: full}})
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(50)}}}})
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{}}})
	if m, err := s.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("got %v, %v; want a heartbeat answer", m, err)
	}
	srv, ok := h.fleet.Server("web-1")
	if !ok || !srv.Online {
		t.Fatalf("got %+v; want web-1 online", srv)
	}
	if got := srv.State.GetCpu().GetBusyPercent(); got != 50 {
		t.Errorf("busy = %v; want 50 (the change merged)", got)
	}
	if got := srv.State.GetHost().GetOs(); got != "debian" {
		t.Errorf("os = %q; want debian (kept from the full state)", got)
	}
	s.CloseSend()
	waitFor(t, 5*time.Second, func() bool { srv, _ := h.fleet.Server("web-1"); return !srv.Online })
}

func TestStreamRefusals(t *testing.T) {
	h := newHarness(t, nil)
	web1 := h.mustEnroll("web-1")

	t.Run("no client certificate", func(t *testing.T) {
		s := connect(t, h.dial(nil))
		s.Send(hello("web-1"))
		_, err := s.Recv()
		wantCode(t, err, codes.Unauthenticated, "client certificate is required")
	})
	t.Run("hello names another server", func(t *testing.T) {
		s := connect(t, h.dial(web1))
		s.Send(hello("db-1"))
		_, err := s.Recv()
		wantCode(t, err, codes.PermissionDenied, `certificate belongs to "web-1"`)
	})
	t.Run("first message not hello", func(t *testing.T) {
		s := connect(t, h.dial(web1))
		s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{}}})
		_, err := s.Recv()
		wantCode(t, err, codes.InvalidArgument, "must be hello")
	})
	t.Run("state over the bounds", func(t *testing.T) {
		s := connect(t, h.dial(web1))
		s.Send(hello("web-1"))
		s.Recv()
		items := make([]*gridcityv1.Listener, statecheck.MaxItems+1)
		for i := range items {
			items[i] = &gridcityv1.Listener{Proto: "tcp", Port: uint32(i)}
		}
		s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: &gridcityv1.StateUpdate{Full: true, Listeners: &gridcityv1.Listeners{Items: items}}}})
		_, err := s.Recv()
		wantCode(t, err, codes.InvalidArgument, "state.listeners has 4097 items")
	})
	t.Run("oversized message", func(t *testing.T) {
		s := connect(t, h.dial(web1))
		s.Send(hello("web-1"))
		s.Recv()
		big := &gridcityv1.StateUpdate{Host: &gridcityv1.HostInfo{Hostname: strings.Repeat("x", MaxMessageBytes+1)}}
		s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: big}})
		_, err := s.Recv()
		wantCode(t, err, codes.ResourceExhausted, "larger than max")
	})
	t.Run("malformed message", func(t *testing.T) {
		s := connect(t, h.dial(web1, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}))))
		s.Send(hello("web-1"))
		s.Recv()
		// A length-delimited field whose length runs past the end.
		if err := s.SendMsg(&rawMessage{b: []byte{0x12, 0x7f, 0x01}}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Recv()
		wantCode(t, err, codes.Internal, "unmarshal")
	})
	t.Run("revoked certificate", func(t *testing.T) {
		db1 := h.mustEnroll("db-1")
		if err := h.st.RevokeAgent(context.Background(), "db-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		s := connect(t, h.dial(db1))
		s.Send(hello("db-1"))
		_, err := s.Recv()
		wantCode(t, err, codes.PermissionDenied, `"db-1" was revoked`)
	})
	t.Run("superseded certificate", func(t *testing.T) {
		old := h.mustEnroll("cache-1")
		h.st.RevokeAgent(context.Background(), "cache-1", time.Now())
		h.mustEnroll("cache-1")
		s := connect(t, h.dial(old))
		s.Send(hello("cache-1"))
		_, err := s.Recv()
		wantCode(t, err, codes.PermissionDenied, "replaced by a newer enrollment")
	})
}

func TestRevokedWhileConnected(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RevocationCheck = 100 * time.Millisecond })
	s := connect(t, h.dial(h.mustEnroll("web-1")))
	s.Send(hello("web-1"))
	s.Recv()
	h.st.RevokeAgent(context.Background(), "web-1", time.Now())
	var err error
	for err == nil {
		_, err = s.Recv()
	}
	wantCode(t, err, codes.PermissionDenied, "revoked")
}

func TestSilentAgentGoesOffline(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	s := connect(t, h.dial(h.mustEnroll("web-1")))
	s.Send(hello("web-1"))
	s.Recv()
	waitFor(t, 5*time.Second, func() bool { srv, _ := h.fleet.Server("web-1"); return srv.Online })
	// Send nothing: the coordinator drops the stream after the idle timeout.
	_, err := s.Recv()
	wantCode(t, err, codes.DeadlineExceeded, "no message")
	srv, _ := h.fleet.Server("web-1")
	if srv.Online {
		t.Fatal("silent server still online")
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawCodec sends bytes as they are, to put malformed messages on the wire.
type rawMessage struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

// A panic while handling an agent's call fails that call with Internal and
// logs the stack; the coordinator goes on.
func TestRecoverCall(t *testing.T) {
	var logs strings.Builder
	s := &Server{logger: slog.New(slog.NewTextHandler(&logs, nil))}
	err := func() (err error) {
		defer s.recoverCall("/gridcity.v1.AgentService/Connect", &err)
		var m map[string]int
		m["x"]++
		return nil
	}()
	if status.Code(err) != codes.Internal || !strings.Contains(logs.String(), "assignment to entry in nil map") {
		t.Fatalf("got %v, log %q; want Internal and the panic logged", err, logs.String())
	}
}
