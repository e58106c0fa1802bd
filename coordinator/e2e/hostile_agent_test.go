package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// hostileAgent is an agent of the test's own, built from proto/: it
// enrolls with a join line as gridcity-agent does and then sends whatever
// the test tells it to.
type hostileAgent struct {
	t    *testing.T
	name string
	conn *grpc.ClientConn
}

func enrollHostile(t *testing.T, c *coordinator, name string) *hostileAgent {
	t.Helper()
	jl, err := gridcityv1.ParseJoinLine(c.joinLine())
	if err != nil {
		t.Fatal(err)
	}
	cert, ca, err := simfleet.Enroll(context.Background(), jl, name, "hostile-test")
	if err != nil {
		t.Fatalf("enroll %s: %v", name, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &hostileAgent{t: t, name: name, conn: conn}
}

// session opens a stream, says hello and takes the settings; the stream
// ends with the test.
func (h *hostileAgent) session() grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage] {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.t.Cleanup(cancel)
	s, err := gridcityv1.NewAgentServiceClient(h.conn).Connect(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Hello{Hello: &gridcityv1.Hello{Name: h.name, AgentVersion: "hostile-test"}}}); err != nil {
		h.t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetSettings() == nil {
		h.t.Fatalf("%s: got %v, %v; want settings", h.name, m, err)
	}
	return s
}

// sendAndSync sends m and then a heartbeat, and waits for the heartbeat's
// answer: the coordinator handles a stream's messages in order, so m has
// been applied by then.
func sendAndSync(t *testing.T, s grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage], m *gridcityv1.AgentMessage) {
	t.Helper()
	s.Send(m)
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{}}})
	for {
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if r.GetHeartbeat() != nil {
			return
		}
	}
}

// refused sends m on a new stream and returns the status the coordinator
// ends the stream with.
func (h *hostileAgent) refused(m *gridcityv1.AgentMessage) *status.Status {
	h.t.Helper()
	s := h.session()
	s.Send(m)
	for {
		if _, err := s.Recv(); err != nil {
			return status.Convert(err)
		}
	}
}

func stateMsg(u *gridcityv1.StateUpdate) *gridcityv1.AgentMessage {
	return &gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: u}}
}

// A hostile agent sends NaN, ±Inf and out-of-range values while a real
// agent streams its host: each bad update is refused with InvalidArgument
// naming the field, list_servers keeps answering with the real agent's
// facts and the hostile one's last good state, the refusals are logged
// once, and after a coordinator restart everything still answers.
func TestHostileAgentCannotBreakTheFleetView(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "good-1", t.TempDir(), c.joinLine())
	good := c.waitStatus(tok, "good-1", "online", 20*time.Second)
	if good.CPU.Cores == 0 || good.OS.Kernel == "" {
		t.Fatalf("good-1 lacks real facts: %+v", good)
	}

	h := enrollHostile(t, c, "hostile-1")
	s := h.session()
	sendAndSync(t, s, stateMsg(&gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "hostile-1", Os: "debian", Kernel: "6.1"}, Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(10), Load1: 0.5},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 1 << 30, UsedPercent: 12.5}}))
	s.Send(stateMsg(&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(10), Load1: math.NaN()}}))
	_, err := s.Recv()
	for err == nil {
		_, err = s.Recv()
	}
	wantRefusal(t, status.Convert(err), "state.cpu.load1 = NaN: not a number")

	for _, c := range []struct {
		m    *gridcityv1.AgentMessage
		want string
	}{
		{stateMsg(&gridcityv1.StateUpdate{Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedPercent: math.Inf(1)}}), "state.memory.usedPercent = +Inf"},
		{stateMsg(&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4, Load5: math.Inf(-1)}}), "state.cpu.load5 = -Inf"},
		{stateMsg(&gridcityv1.StateUpdate{Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 10}, {Mount: "/srv", TotalBytes: 10, UsedBytes: math.MaxUint64 - 4}}}}),
			"state.disks[1].usedBytes = 18446744073709551611 (-5 as a signed number): a size cannot be negative"},
		{stateMsg(&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(250)}}), "state.cpu.busyPercent = 250: a percentage is between 0 and 100"},
		{stateMsg(&gridcityv1.StateUpdate{Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Port: 70000}}}}), "state.listeners[0].port = 70000"},
		{stateMsg(&gridcityv1.StateUpdate{CollectedUnixMs: time.Now().Add(time.Hour).UnixMilli()}), "ahead of the coordinator's clock"},
		{&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_ProbeResult{ProbeResult: &gridcityv1.ProbeResult{ProbeId: "x", Metrics: map[string]float64{"days_left": math.NaN()}}}},
			`probeResult.metrics["days_left"] = NaN`},
	} {
		wantRefusal(t, h.refused(c.m), c.want)
	}

	check := func(when string) {
		t.Helper()
		m, err := c.servers(tok)
		if err != nil {
			t.Fatalf("%s: list_servers failed: %v", when, err)
		}
		if g := m["good-1"]; g.CPU.Cores != good.CPU.Cores || g.OS.Kernel != good.OS.Kernel {
			t.Errorf("%s: good-1 = %+v; want its real facts", when, g)
		}
		if b := m["hostile-1"]; b.CPU.Cores != 4 || b.OS.Hostname != "hostile-1" || b.Memory.TotalBytes != 8<<30 {
			t.Errorf("%s: hostile-1 = %+v; want its last good state (4 cores, 8 GiB)", when, b)
		}
	}
	check("after the refusals")
	m, err := c.servers(tok)
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	for _, g := range m["hostile-1"].Gaps {
		said = said || strings.Contains(g.Reason, "refused this agent's latest state update") && strings.Contains(g.Reason, "ahead of the coordinator's clock")
	}
	if !said {
		t.Errorf("hostile-1 gaps %+v; want one saying its latest state update was refused and why", m["hostile-1"].Gaps)
	}
	if n := strings.Count(c.p.out.String(), "agent message refused"); n != 1 {
		t.Errorf("the coordinator logged %d refusals of hostile-1 within a minute; want 1 (rate-limited)", n)
	}

	// A restart keeps both, answers at once, and the hostile agent is
	// still refused; the real agent comes back by itself.
	c.p.signal(syscall.SIGTERM)
	if !c.p.exited(15 * time.Second) {
		t.Fatal("coordinator did not stop on SIGTERM")
	}
	c.start()
	check("after a restart")
	wantRefusal(t, h.refused(stateMsg(&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{BusyPercent: proto.Float64(math.NaN())}})), "state.cpu.busyPercent = NaN")
	c.waitStatus(tok, "good-1", "online", 30*time.Second)
	check("after the real agent reconnected")
}

func wantRefusal(t *testing.T, s *status.Status, want string) {
	t.Helper()
	if s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), want) {
		t.Errorf("refusal %v: %q; want InvalidArgument naming %q", s.Code(), s.Message(), want)
	}
}
