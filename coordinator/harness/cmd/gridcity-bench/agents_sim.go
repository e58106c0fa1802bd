package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// The simulated agents enroll and stream the way gridcity-agent does
// (agent/internal/link, which this module cannot import): the same pinned
// CA fetch, key, CSR and Enroll call, then one mTLS connection and one
// Connect stream each. They answer nothing: no commands, no probes.

// simVersion is what the simulated agents call themselves.
const simVersion = "gridcity-bench-sim"

// simIdentity is one enrolled simulated agent.
type simIdentity struct {
	name string
	cert tls.Certificate
}

// enrollSim enrolls a simulated agent the way gridcity-agent does, with
// its identity in memory.
func enrollSim(ctx context.Context, jl gridcityv1.JoinLine, name string) (simIdentity, *x509.Certificate, error) {
	cert, ca, err := simfleet.Enroll(ctx, jl, name, simVersion)
	if err != nil {
		return simIdentity{}, nil, err
	}
	return simIdentity{name: name, cert: cert}, ca, nil
}

// transient is an enrollment failure worth another try: the coordinator
// was busy, not refusing.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// simFleet runs the simulated agents' streams from one process.
type simFleet struct {
	addr  string // where an agent connects first, unless its own addr says
	roots *x509.CertPool
	// up, if set, is called whenever an agent's stream is up (its settings
	// arrived) on the coordinator at addr.
	up func(a *simAgent, addr string)
	// heartbeat and change are the intervals of heartbeats and of CPU and
	// memory changes (the coordinator's default settings: 5 s both).
	heartbeat, change time.Duration

	heartbeats, changes atomic.Int64 // messages sent
	reconnects          atomic.Int64 // streams that ended and were opened again
	refused             atomic.Int64 // agents the coordinator refused for good
	connected           atomic.Int64 // streams whose settings arrived

	mu      sync.Mutex
	lastErr error
	causes  map[string]int // why streams ended, by status code and message
	// replicas are the coordinators the agents were told of (a Replicas
	// message), which gridcity-agent keeps in its state directory.
	replicas []string
}

// setReplicas keeps the coordinators' addresses a stream sent.
func (f *simFleet) setReplicas(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicas = slices.Clone(addrs)
}

// knownReplicas is how many coordinators the agents were told of.
func (f *simFleet) knownReplicas() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replicas)
}

// after is where agent a connects once addr failed, as gridcity-agent
// chooses: the next in its own turn of its first address and the replicas
// it was told of (gridcityv1.ReplicaOrder).
func (f *simFleet) after(a *simAgent, addr string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return gridcityv1.NextReplica(gridcityv1.ReplicaOrder(cmp.Or(a.addr, f.addr), f.replicas, a.id.name), addr)
}

func (f *simFleet) fail(name string, err error) {
	st, _ := status.FromError(err)
	cause := st.Code().String() + ": " + st.Message()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = fmt.Errorf("%s: %w", name, err)
	if f.causes == nil {
		f.causes = map[string]int{}
	}
	f.causes[cause]++
}

// endCauses says why streams ended, the five commonest first.
func (f *simFleet) endCauses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	causes := slices.Collect(maps.Keys(f.causes))
	slices.SortFunc(causes, func(a, b string) int {
		return cmp.Or(cmp.Compare(f.causes[b], f.causes[a]), cmp.Compare(a, b))
	})
	var out []string
	for _, c := range causes[:min(len(causes), 5)] {
		out = append(out, fmt.Sprintf("%d× %s", f.causes[c], c))
	}
	return out
}

// storm says whether the fleet is in a reconnect storm while started of
// its n agents have started: its streams end faster than they come back
// (more than half as many ends as agents), so waiting longer is no use.
func (f *simFleet) storm(started, n int) error {
	if ended := f.reconnects.Load(); ended > int64(n)/2+10 {
		return fmt.Errorf("%w: %d streams ended while %d of %d agents were starting (%d up); streams ended: %s",
			errNotHeld, ended, started, n, f.connected.Load(), strings.Join(f.endCauses(), "; "))
	}
	return nil
}

func (f *simFleet) lastError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// simAgent is one simulated agent: its identity, its place in the
// simulated fleet and its state.
type simAgent struct {
	i     int
	addr  string // the coordinator it enrolled with and connects to first (empty: the fleet's)
	id    simIdentity
	hello *gridcityv1.Hello
	full  *gridcityv1.StateUpdate
	rng   *rand.Rand
}

// run keeps the agent connected until ctx ends, reconnecting the way
// gridcity-agent does (equal-jitter backoff from 1 s, each attempt to the
// next coordinator it knows). ready is called whenever a stream's settings
// arrive.
func (f *simFleet) run(ctx context.Context, a *simAgent, ready func()) {
	attempt := 0
	addr := cmp.Or(a.addr, f.addr)
	for {
		start := time.Now()
		err := f.session(ctx, a, addr, ready)
		if ctx.Err() != nil {
			return
		}
		f.fail(a.id.name, err)
		if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unauthenticated {
			f.refused.Add(1)
			return
		}
		f.reconnects.Add(1)
		addr = f.after(a, addr)
		if time.Since(start) > time.Minute {
			attempt = 0
		}
		d := min(time.Second<<min(attempt, 5), 30*time.Second)
		attempt++
		select {
		case <-ctx.Done():
			return
		case <-time.After(d/2 + rand.N(d/2+1)):
		}
	}
}

// sourceAddrs is how many loopback addresses the agents connect from:
// each source address has its own ephemeral ports (about 28,000 on Linux),
// so that 50,000 agents can connect to one coordinator on loopback.
const sourceAddrs = 8

// sourceAddr is where agent i connects from to a coordinator at addr: one
// of sourceAddrs loopback addresses if addr is on 127.0.0.0/8, else the
// system's choice (nil).
func sourceAddr(i int, addr string) net.Addr {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%sourceAddrs))}
}

// session runs one stream: hello, the full state, then heartbeats and
// changes from timers (no goroutine of its own while idle), and receives
// until the stream breaks.
func (f *simFleet) session(ctx context.Context, a *simAgent, addr string, ready func()) error {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{a.id.cert}, RootCAs: f.roots,
			ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13,
		})),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		// Ten thousand connections in one process: a shared write buffer
		// and a small read buffer keep the driver's own memory down. The
		// coordinator's side is left as it is.
		grpc.WithSharedWriteBuffer(true),
		grpc.WithReadBufferSize(8<<10),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: sourceAddr(a.i, addr)}
			return d.DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := gridcityv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		return err
	}
	// Only one goroutine may send on a stream at a time: the timers'
	// callbacks take turns under mu (which also guards the timers and the
	// agent's state), and do nothing once done is set.
	var (
		mu           sync.Mutex
		done         bool
		beat, change *time.Timer
	)
	send := func(m *gridcityv1.AgentMessage) bool {
		if done {
			return false
		}
		if err := stream.Send(m); err != nil {
			cancel()
			return false
		}
		return true
	}
	mu.Lock()
	ok := send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Hello{Hello: a.hello}}) &&
		send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: a.fullState()}})
	if !ok {
		mu.Unlock()
		_, err := stream.Recv() // why the coordinator closed the stream
		return err
	}
	// A fleet's agents connected at different times: the first heartbeat
	// and the first change come at a random point of their interval, and
	// changes wander ±10 % around theirs.
	beat = time.AfterFunc(rand.N(f.heartbeat), func() {
		mu.Lock()
		defer mu.Unlock()
		if send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{SentUnixMs: time.Now().UnixMilli()}}}) {
			f.heartbeats.Add(1)
			beat.Reset(f.heartbeat)
		}
	})
	change = time.AfterFunc(rand.N(f.change), func() {
		mu.Lock()
		defer mu.Unlock()
		if !done && send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: a.nextChange()}}) {
			f.changes.Add(1)
			change.Reset(f.change*9/10 + rand.N(f.change/5+1))
		}
	})
	mu.Unlock()
	defer func() {
		cancel() // a send blocked on flow control returns
		mu.Lock()
		done = true
		beat.Stop()
		change.Stop()
		mu.Unlock()
	}()

	up := false
	defer func() {
		if up {
			f.connected.Add(-1)
		}
	}()
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if r := m.GetReplicas(); r != nil {
			f.setReplicas(r.GetGrpcAddresses())
		}
		if !up && m.GetSettings() != nil {
			up = true
			f.connected.Add(1)
			ready()
			if f.up != nil {
				f.up(a, addr)
			}
		}
	}
}
