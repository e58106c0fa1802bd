// Package agentapi is the coordinator's gRPC face to its agents: enrollment
// with a join token, and the one long-lived mTLS stream per agent that
// carries state in and settings (later commands and probes) out.
package agentapi

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/statecheck"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// MaxMessageBytes bounds one message on the stream; a bigger one ends the
// stream with ResourceExhausted.
const MaxMessageBytes = 4 << 20

// Config tunes the agent API. DefaultConfig gives the production values.
type Config struct {
	// IdleTimeout ends a stream that has been silent this long, so that a
	// server whose network vanished is offline within it.
	IdleTimeout time.Duration
	// HelloTimeout bounds the wait for an agent's first message.
	HelloTimeout time.Duration
	// RevocationCheck is how often a live stream re-checks its certificate.
	RevocationCheck time.Duration
	// Settings are sent to every agent when its stream opens.
	Settings *gridcityv1.Settings
	// Metrics counts messages, refusals and enrollments (optional).
	Metrics *telemetry.Metrics
}

// DefaultConfig: heartbeats every 5 s, a stream silent for 12 s is dropped
// (offline within 15 s), cheap facts every 5 s.
func DefaultConfig() Config {
	return Config{
		IdleTimeout:     12 * time.Second,
		HelloTimeout:    10 * time.Second,
		RevocationCheck: 30 * time.Second,
		Settings: &gridcityv1.Settings{
			FastIntervalSeconds:      5,
			MediumIntervalSeconds:    30,
			SlowIntervalSeconds:      300,
			UpdatesIntervalSeconds:   1800,
			HeartbeatIntervalSeconds: 5,
		},
	}
}

// Store is the part of the coordinator's store the agent API reads and
// writes: enrollment, and the agent a stream's certificate names.
type Store interface {
	// Enroll consumes a join token and records the agent, atomically.
	Enroll(ctx context.Context, tokenHash []byte, now time.Time, a store.Agent) (again bool, err error)
	Agent(ctx context.Context, name string) (store.Agent, error)
}

// Server implements gridcity.v1.AgentService.
type Server struct {
	gridcityv1.UnimplementedAgentServiceServer

	cfg    Config
	store  Store
	ca     *pki.CA
	fleet  *fleet.Fleet
	logger *slog.Logger
	now    func() time.Time
	// sinks are set by GRPCServer, before any stream opens.
	sinks Sinks

	mu       sync.Mutex
	streams  map[string]*agentStream
	stopping bool
	refusals refusals
	// replicas is the live coordinators' list every agent is told of.
	replicas *gridcityv1.Replicas
	// rechecking: the loop that re-checks the live streams' certificates
	// runs (recheckLoop); it ends when the server stops.
	rechecking bool
	stop       chan struct{}
}

// SetReplicas records the gRPC addresses of the live coordinators (this
// one included) and, when they changed, tells every connected agent; an
// agent that connects later is told when its stream opens. A list an agent
// could not use is refused whole and the previous one kept.
func (s *Server) SetReplicas(addrs []string) error {
	r := &gridcityv1.Replicas{GrpcAddresses: slices.Clone(addrs)}
	if err := gridcityv1.CheckReplicas(r); err != nil {
		return fmt.Errorf("replica list not sent to agents: %w", err)
	}
	s.mu.Lock()
	if slices.Equal(s.replicas.GetGrpcAddresses(), r.GrpcAddresses) && s.replicas != nil {
		s.mu.Unlock()
		return nil
	}
	s.replicas = r
	names := make([]string, 0, len(s.streams))
	for n := range s.streams {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		if err := s.Send(n, replicasMessage(r)); err != nil {
			// It hears of the list when it reconnects.
			s.logger.Warn("replica list not sent to an agent", "server", n, "err", err)
		}
	}
	return nil
}

func (s *Server) currentReplicas() *gridcityv1.Replicas {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas
}

func replicasMessage(r *gridcityv1.Replicas) *gridcityv1.CoordinatorMessage {
	return &gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_Replicas{Replicas: r}}
}

// Probes assigns probes to agents and receives their results (the prober).
type Probes interface {
	// ProbesFor is what a server's agent should run now.
	ProbesFor(server string) []*gridcityv1.ProbeSpec
	// HandleResult records a result an agent sent.
	HandleResult(server string, r *gridcityv1.ProbeResult)
	// Kick asks for the assignment to be revisited: an agent connected.
	Kick()
}

func (s *Server) probeSink() Probes { return s.sinks.Probes }

// Commands receives what agents report about commands (the command service).
type Commands interface {
	// HandleEvent records an event; an error means it was not recorded.
	HandleEvent(ctx context.Context, server string, ev *gridcityv1.CommandEvent) error
	// Reconnected settles commands from an agent's journal and returns the
	// request ids it may forget.
	Reconnected(ctx context.Context, server string, helloAt time.Time, journal []*gridcityv1.CommandEvent) []string
}

func (s *Server) commandSink() Commands { return s.sinks.Commands }

// Sinks receive what the agents send: the command service their command
// events, the prober their probe results. Nil ones drop (and log) what
// would reach them.
type Sinks struct {
	Commands Commands
	Probes   Probes
}

type agentStream struct {
	id     uint64
	cancel context.CancelFunc
	out    chan *gridcityv1.CoordinatorMessage
	probes bool // the agent runs probes
	// serial is the stream's client certificate's, for the re-checks.
	serial string
	// ended is why recheckLoop ended the stream, if it did (under Server.mu).
	ended error
}

// New returns an agent API server.
func New(cfg Config, st Store, ca *pki.CA, f *fleet.Fleet, logger *slog.Logger) *Server {
	return &Server{cfg: cfg, store: st, ca: ca, fleet: f, logger: logger, now: time.Now, streams: map[string]*agentStream{}, stop: make(chan struct{})}
}

// GRPCServer returns a gRPC server with TLS from the CA, keepalives that
// notice a dead peer in seconds, and the message size bound, whose streams
// hand what agents send to sinks. Call it once, before serving: nothing
// reaches the sinks before the server exists.
func (s *Server) GRPCServer(sinks Sinks, extraNames ...string) (*grpc.Server, error) {
	s.sinks = sinks
	cert, err := s.ca.ServerCertificate(extraNames...)
	if err != nil {
		return nil, err
	}
	tlsCfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		// Enroll is the one call made before the agent has a certificate;
		// Connect refuses a stream without a verified one.
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  s.ca.Pool(),
		MinVersion: tls.VersionTLS13,
	}
	gs := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		// Tens of thousands of mostly idle streams of small messages (see
		// bench/profiles.md). gRPC's write buffer is taken from a shared
		// pool for each flush rather than held for the connection's life,
		// and is small: a heartbeat's answer is a few dozen bytes. There is
		// no read buffer of gRPC's own: crypto/tls already holds the
		// record being read, so a second buffer per connection (16 KiB,
		// 30 % of the heap at 10,000 agents) saved no system call.
		grpc.SharedWriteBuffer(true),
		grpc.WriteBufferSize(4<<10),
		grpc.ReadBufferSize(0),
		// Static flow-control windows: with the dynamic ones gRPC sends a
		// PING to estimate the bandwidth after each message it receives,
		// a write and a read for every state change and heartbeat. 1 MiB
		// is more than an agent's largest message needs to flow on a LAN,
		// and bounds what one connection can make the coordinator buffer.
		grpc.StaticStreamWindowSize(1<<20),
		grpc.StaticConnWindowSize(1<<20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 4 * time.Second, PermitWithoutStream: true}),
		// What an agent sends is not trusted: should a bug in handling it
		// panic, that call fails, not the coordinator with every stream.
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (_ any, err error) {
			defer s.recoverCall(info.FullMethod, &err)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer s.recoverCall(info.FullMethod, &err)
			return h(srv, ss)
		}),
	)
	gridcityv1.RegisterAgentServiceServer(gs, s)
	return gs, nil
}

// HashToken is how join tokens are kept: sha256 of the token text.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Enroll trades a join token and a CSR for a client certificate.
func (s *Server) Enroll(ctx context.Context, req *gridcityv1.EnrollRequest) (*gridcityv1.EnrollResponse, error) {
	res, reason, err := s.enroll(ctx, req)
	if err != nil {
		s.cfg.Metrics.EnrollmentRefused(reason)
	}
	return res, err
}

// enroll is Enroll, with the reason of a refusal for the metrics.
func (s *Server) enroll(ctx context.Context, req *gridcityv1.EnrollRequest) (*gridcityv1.EnrollResponse, string, error) {
	if req.GetJoinToken() == "" {
		return nil, "no_token", status.Error(codes.InvalidArgument, "enrollment without a join token: run `gridcity join` on the coordinator and use the join line it prints")
	}
	if err := pki.ValidName(req.GetName()); err != nil {
		return nil, "bad_name", status.Errorf(codes.InvalidArgument, "%v (set it with --name)", err)
	}
	cert, err := s.ca.SignAgent(req.GetCsrDer(), req.GetName())
	if err != nil {
		return nil, "bad_csr", status.Errorf(codes.InvalidArgument, "enrollment of %q refused: %v", req.GetName(), err)
	}
	now := s.now()
	again, err := s.store.Enroll(ctx, HashToken(req.GetJoinToken()), now, store.Agent{Name: req.GetName(), Serial: cert.Serial, EnrolledAt: now, Key: cert.KeySHA256})
	switch {
	case errors.Is(err, store.ErrTokenUnknown):
		return nil, "token_unknown", status.Error(codes.Unauthenticated, "join token unknown: it was mistyped or belongs to another coordinator; run `gridcity join` for a new one")
	case errors.Is(err, store.ErrTokenExpired):
		return nil, "token_expired", status.Error(codes.Unauthenticated, "join token expired: run `gridcity join` for a new one (--ttl sets its lifetime)")
	case errors.Is(err, store.ErrTokenUsed):
		return nil, "token_used", status.Error(codes.Unauthenticated, "join token already used: each join line enrolls one agent; run `gridcity join` for another")
	case errors.Is(err, store.ErrNameTaken):
		return nil, "name_taken", status.Errorf(codes.AlreadyExists, "server name %q is already enrolled by another agent: choose another --name, or revoke the old one with `gridcity agents revoke %s`", req.GetName(), req.GetName())
	case err != nil:
		// The store failed (disk full, locked by another process …): the
		// same request can succeed later, so the agent is told to retry.
		s.logger.Error("enrollment failed", "server", req.GetName(), "err", err)
		return nil, "store_unavailable", status.Error(codes.Unavailable, "enrollment could not be recorded right now (see the coordinator's log); retry shortly")
	}
	if again {
		// The agent's first answer was lost (a timeout, a cut
		// connection): the same key asked again, and gets a new
		// certificate in place of the one it never received.
		s.logger.Info("agent enrolled again with the same key; the answer to its first enrollment did not reach it", "server", req.GetName(), "serial", cert.Serial)
	} else {
		s.logger.Info("agent enrolled", "server", req.GetName(), "serial", cert.Serial, "version", req.GetAgentVersion())
	}
	return &gridcityv1.EnrollResponse{CertificateDer: cert.DER, CaDer: s.ca.Cert().Raw, ServerName: pki.ServerName}, "", nil
}

// recoverCall, deferred, turns a panic in a call's handler into an
// Internal error for that call and a logged stack.
func (s *Server) recoverCall(method string, err *error) {
	if p := recover(); p != nil {
		s.logger.Error("panic in an agent call; the call failed, the coordinator goes on", "method", method, "panic", p, "stack", string(debug.Stack()))
		*err = status.Error(codes.Internal, "internal error in the coordinator (see its log); reconnecting")
	}
}

// Connect serves one agent's stream.
func (s *Server) Connect(stream grpc.BidiStreamingServer[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage]) error {
	ctx := stream.Context()
	name, serial, err := s.authenticate(ctx)
	if err != nil {
		return err
	}
	hello, err := s.receiveHello(stream, name)
	if err != nil {
		return err
	}
	helloAt := s.now()
	// Settle what the agent reports of earlier commands before this stream
	// can carry a new one, so that a command dispatched now is never
	// judged by a journal written before it.
	var forget []string
	if c := s.commandSink(); c != nil {
		forget = c.Reconnected(ctx, name, helloAt, hello.GetJournal())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id := s.fleet.Connect(hello)
	as := &agentStream{id: id, cancel: cancel, out: make(chan *gridcityv1.CoordinatorMessage, 64),
		probes: slices.Contains(hello.GetCapabilities(), "probes"), serial: serial}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "coordinator stopping; reconnect shortly")
	}
	if !s.rechecking {
		s.rechecking = true
		go s.recheckLoop()
	}
	if old := s.streams[name]; old != nil {
		old.cancel() // the agent reconnected before its old stream was noticed dead
	}
	s.streams[name] = as
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.streams[name] == as {
			delete(s.streams, name)
		}
		s.mu.Unlock()
		s.fleet.Disconnect(name, id)
	}()
	log := s.logger.With("server", name)
	log.Info("agent connected", "version", hello.GetAgentVersion(), "commands", hello.GetCommandsEnabled())

	settings := s.cfg.Settings
	if p := s.probeSink(); p != nil && as.probes {
		settings = s.settingsWith(p.ProbesFor(name))
		p.Kick() // this server may be a vantage point now
	}
	if err := stream.Send(&gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_Settings{Settings: settings}}); err != nil {
		return err
	}
	if r := s.currentReplicas(); r != nil {
		if err := stream.Send(replicasMessage(r)); err != nil {
			return err
		}
	}
	if len(forget) > 0 {
		if err := stream.Send(&gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_JournalAck{JournalAck: &gridcityv1.JournalAck{Forget: forget}}}); err != nil {
			return err
		}
	}
	// The agent's messages are handled in the goroutine that receives
	// them, in order; this one waits for what ends the stream and sends
	// what others queue. Both send, taking turns under out. (One goroutine
	// cannot do both: a receive that waits ends only with the stream, and
	// then tells the agent Canceled, not why.)
	out := &streamSender{stream: stream}
	var lastHeard atomic.Int64 // unix ns of the last message from the agent
	lastHeard.Store(s.now().UnixNano())
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				log.Info("agent disconnected", "err", err)
				recvErr <- err
				return
			}
			lastHeard.Store(s.now().UnixNano())
			if err := s.handle(ctx, out, name, id, m); err != nil {
				// A refusal was logged by refuse, once a minute at most;
				// anything else is a send that failed.
				if status.Code(err) != codes.InvalidArgument {
					log.Warn("agent stream ended while answering it", "err", err)
				}
				recvErr <- err
				return
			}
		}
	}()
	idle := time.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			ended := as.ended
			s.mu.Unlock()
			if ended != nil {
				log.Warn("agent stream ended", "reason", ended)
				return ended
			}
			log.Info("agent stream closed", "reason", context.Cause(ctx))
			return status.Error(codes.Canceled, "stream replaced or coordinator stopping")
		case err := <-recvErr:
			return err
		case <-idle.C:
			// The timer is set once and moved on here, rather than reset
			// for every message.
			if silent := s.now().Sub(time.Unix(0, lastHeard.Load())); silent < s.cfg.IdleTimeout {
				idle.Reset(s.cfg.IdleTimeout - silent)
				continue
			}
			log.Warn("agent silent; dropping its stream", "after", s.cfg.IdleTimeout)
			return status.Errorf(codes.DeadlineExceeded, "no message for %s", s.cfg.IdleTimeout)
		case m := <-as.out:
			if err := out.Send(m); err != nil {
				return err
			}
		}
	}
}

// recheckLoop re-checks the certificate of every live stream every
// RevocationCheck, until the server stops: a revocation is made by another
// process (gridcity agents revoke), or another replica enrolls the name
// anew. One loop for every stream, rather than a ticker in each, keeps the
// store's reads (deep in the stack with SQLite) out of the streams'
// goroutines, whose stacks stay small.
func (s *Server) recheckLoop() {
	t := time.NewTicker(s.cfg.RevocationCheck)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		live := make(map[string]*agentStream, len(s.streams))
		maps.Copy(live, s.streams)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RevocationCheck)
		check := s.recheck
		if l, ok := s.store.(agentLister); ok {
			check = s.recheckFrom(ctx, l)
		}
		for name, as := range live {
			err := check(ctx, name, as.serial)
			if status.Code(err) == codes.Unavailable {
				// The store could not say (PostgreSQL restarting): not a
				// revocation. The streams stay; the next round asks again.
				s.logger.Warn("could not re-check the agents' certificates; keeping their streams until the store answers", "reason", err)
				break
			}
			if err != nil {
				s.mu.Lock()
				as.ended = err
				s.mu.Unlock()
				as.cancel()
			}
		}
		cancel()
	}
}

// agentLister is a store that reads every agent at once: the re-checks of
// ten thousand streams are then one read rather than ten thousand.
type agentLister interface {
	Agents(ctx context.Context) ([]store.Agent, error)
}

// recheckFrom reads every agent from l and returns recheck answering from
// what it read; if the read failed, every check fails as recheck would.
func (s *Server) recheckFrom(ctx context.Context, l agentLister) func(ctx context.Context, name, serial string) error {
	agents, err := l.Agents(ctx)
	if err != nil {
		return func(context.Context, string, string) error {
			_, err := s.judge(store.Agent{}, err, "", "")
			return err
		}
	}
	byName := make(map[string]store.Agent, len(agents))
	for _, a := range agents {
		byName[a.Name] = a
	}
	return func(_ context.Context, name, serial string) error {
		a, ok := byName[name]
		var err error
		if !ok {
			err = store.ErrNotFound
		}
		reason, err := s.judge(a, err, name, serial)
		if err != nil {
			s.cfg.Metrics.StreamRefused(reason)
		}
		return err
	}
}

// streamSender sends on one agent's stream from the two goroutines that
// serve it: gRPC allows one sender at a time.
type streamSender struct {
	mu     sync.Mutex
	stream grpc.BidiStreamingServer[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage]
}

// Send sends m, waiting for the other goroutine's send to end.
func (o *streamSender) Send(m *gridcityv1.CoordinatorMessage) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stream.Send(m)
}

func (s *Server) handle(ctx context.Context, stream *streamSender, name string, id uint64, m *gridcityv1.AgentMessage) error {
	s.cfg.Metrics.AgentMessage(messageKind(m))
	switch b := m.Body.(type) {
	case *gridcityv1.AgentMessage_State:
		if err := statecheck.State(b.State, s.now()); err != nil {
			s.fleet.Refuse(name, err.Error())
			s.cfg.Metrics.AgentRefused("state")
			return s.refuse(name, "state update", err)
		}
		s.fleet.Apply(name, id, b.State)
	case *gridcityv1.AgentMessage_Heartbeat:
		s.fleet.Touch(name, id)
		return stream.Send(&gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{SentUnixMs: s.now().UnixMilli()}}})
	case *gridcityv1.AgentMessage_Hello:
		s.cfg.Metrics.AgentRefused("hello")
		return s.refuse(name, "message", errors.New("hello sent twice on one stream"))
	case nil:
		s.cfg.Metrics.AgentRefused("empty")
		return s.refuse(name, "message", errors.New("empty message: the agent and coordinator versions may not match"))
	case *gridcityv1.AgentMessage_CommandEvent:
		s.fleet.Touch(name, id)
		c := s.commandSink()
		if c == nil {
			return nil
		}
		if err := c.HandleEvent(ctx, name, b.CommandEvent); err != nil {
			// Not recorded, so not acknowledged: the agent's journal keeps
			// it and reports it after the next reconnect.
			s.logger.Error("command event not recorded", "server", name, "request", b.CommandEvent.GetRequestId(), "err", err)
			return nil
		}
		// An ended command is recorded now; the agent may forget it.
		switch b.CommandEvent.GetKind() {
		case gridcityv1.CommandEvent_KIND_EXITED, gridcityv1.CommandEvent_KIND_UNKNOWN, gridcityv1.CommandEvent_KIND_REFUSED:
			return stream.Send(&gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_JournalAck{JournalAck: &gridcityv1.JournalAck{Forget: []string{b.CommandEvent.GetRequestId()}}}})
		}
	case *gridcityv1.AgentMessage_ProbeResult:
		if err := statecheck.ProbeResult(b.ProbeResult, s.now()); err != nil {
			s.cfg.Metrics.AgentRefused("probe_result")
			return s.refuse(name, "probe result", err)
		}
		s.fleet.Touch(name, id)
		if p := s.probeSink(); p != nil {
			p.HandleResult(name, b.ProbeResult)
		}
	default:
		s.fleet.Touch(name, id)
	}
	return nil
}

// refuse logs a refused message (rate-limited per server) and returns the
// InvalidArgument status that ends the agent's stream: the message is not
// applied, and what the fleet holds of the server stays as it was.
func (s *Server) refuse(name, what string, err error) error {
	if n, ok := s.refusals.due(name, s.now()); ok {
		s.logger.Warn("agent message refused: the coordinator keeps the server's earlier state", "server", name, "message", what, "err", err, "refusedSinceLastLog", n)
	}
	return status.Errorf(codes.InvalidArgument, "%s from %s refused, nothing of it was applied: %v", what, name, err)
}

// settingsWith is the agents' settings with a server's probes.
func (s *Server) settingsWith(probes []*gridcityv1.ProbeSpec) *gridcityv1.Settings {
	st := proto.Clone(s.cfg.Settings).(*gridcityv1.Settings)
	st.Probes = probes
	return st
}

// AssignProbes sends a server's agent its new list of probes.
func (s *Server) AssignProbes(name string, specs []*gridcityv1.ProbeSpec) error {
	if err := s.runsProbes(name); err != nil {
		return err
	}
	return s.Send(name, &gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_Settings{Settings: s.settingsWith(specs)}})
}

// RunProbe asks a server's agent to probe once now; the result comes back
// as a ProbeResult with the spec's id.
func (s *Server) RunProbe(name string, spec *gridcityv1.ProbeSpec) error {
	if err := s.runsProbes(name); err != nil {
		return err
	}
	return s.Send(name, &gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_RunProbe{RunProbe: &gridcityv1.RunProbe{Probe: spec}}})
}

func (s *Server) runsProbes(name string) error {
	s.mu.Lock()
	as := s.streams[name]
	s.mu.Unlock()
	switch {
	case as == nil:
		return fmt.Errorf("server %q is not connected", name)
	case !as.probes:
		return fmt.Errorf("the agent on %q does not run probes (probes: false in its config, or an older agent)", name)
	}
	return nil
}

// authenticate returns the server name bound to the stream's verified client
// certificate and the certificate's serial, refusing unknown, superseded
// and revoked certificates.
func (s *Server) authenticate(ctx context.Context) (name, serial string, err error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		s.cfg.Metrics.StreamRefused("no_certificate")
		return "", "", status.Error(codes.Unauthenticated, "no peer information")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		s.cfg.Metrics.StreamRefused("no_certificate")
		return "", "", status.Error(codes.Unauthenticated, "a client certificate is required: enroll first with `gridcity-agent run --join \"JOIN LINE\"`")
	}
	leaf := ti.State.VerifiedChains[0][0]
	name, serial = leaf.Subject.CommonName, pki.SerialHex(leaf.SerialNumber)
	return name, serial, s.recheck(ctx, name, serial)
}

// recheck refuses the certificate of the given serial for the named
// server if it is unknown, superseded or revoked.
func (s *Server) recheck(ctx context.Context, name, serial string) error {
	reason, err := s.checkCertificate(ctx, name, serial)
	if err != nil {
		s.cfg.Metrics.StreamRefused(reason)
	}
	return err
}

// checkCertificate is recheck, with the reason of a refusal for the
// metrics.
func (s *Server) checkCertificate(ctx context.Context, name, serial string) (string, error) {
	a, err := s.store.Agent(ctx, name)
	return s.judge(a, err, name, serial)
}

// judge is checkCertificate on the agent record a read from the store,
// or the error reading it.
func (s *Server) judge(a store.Agent, err error, name, serial string) (string, error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "unknown_agent", status.Errorf(codes.Unauthenticated, "certificate for %q is not known to this coordinator: enroll again with a new join line", name)
	case err != nil:
		s.logger.Error("read agent record", "server", name, "err", err)
		msg := "coordinator store unavailable; retry"
		if u := (*store.UnavailableError)(nil); errors.As(err, &u) {
			msg = u.Summary() + ": this coordinator cannot check the agent's certificate until it is back; retry"
		}
		return "store_unavailable", status.Error(codes.Unavailable, msg)
	case a.Revoked():
		return "revoked", status.Errorf(codes.PermissionDenied, "certificate for %q was revoked at %s: enroll again with a new join line from `gridcity join`", name, a.RevokedAt.Format(time.RFC3339))
	case a.Serial != serial:
		return "superseded", status.Errorf(codes.PermissionDenied, "certificate for %q was replaced by a newer enrollment: this agent's credentials are stale; enroll again", name)
	}
	return "", nil
}

func (s *Server) receiveHello(stream grpc.BidiStreamingServer[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage], name string) (*gridcityv1.Hello, error) {
	type result struct {
		m   *gridcityv1.AgentMessage
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		ch <- result{m, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(s.cfg.HelloTimeout):
		return nil, status.Errorf(codes.DeadlineExceeded, "no hello within %s", s.cfg.HelloTimeout)
	}
	if r.err != nil {
		return nil, r.err
	}
	s.cfg.Metrics.AgentMessage(messageKind(r.m))
	hello := r.m.GetHello()
	if hello == nil {
		return nil, status.Error(codes.InvalidArgument, "the first message on a stream must be hello")
	}
	if hello.GetName() != name {
		s.cfg.Metrics.StreamRefused("hello_mismatch")
		return nil, status.Errorf(codes.PermissionDenied, "hello names %q but the certificate belongs to %q", hello.GetName(), name)
	}
	if err := validateHello(hello); err != nil {
		s.cfg.Metrics.AgentRefused("hello")
		return nil, status.Errorf(codes.InvalidArgument, "hello from %s refused: %v", name, err)
	}
	return hello, nil
}

// Send queues a message for the named agent's stream.
func (s *Server) Send(name string, m *gridcityv1.CoordinatorMessage) error {
	s.mu.Lock()
	as := s.streams[name]
	s.mu.Unlock()
	if as == nil {
		return fmt.Errorf("server %q is not connected", name)
	}
	select {
	case as.out <- m:
		return nil
	default:
		return fmt.Errorf("server %q is not keeping up with its stream", name)
	}
}

// Shutdown ends every stream, so that a graceful stop of the gRPC server
// does not wait for agents that never hang up; they reconnect to the next
// coordinator process.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		close(s.stop)
	}
	s.stopping = true
	for _, as := range s.streams {
		as.cancel()
	}
}

// Connected reports the names of servers with a live stream.
func (s *Server) Connected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.streams))
	for n := range s.streams {
		out = append(out, n)
	}
	return out
}

// messageKind names an agent message's kind for the metrics: a bounded
// set, whatever the agent sends.
func messageKind(m *gridcityv1.AgentMessage) string {
	switch m.GetBody().(type) {
	case *gridcityv1.AgentMessage_Hello:
		return "hello"
	case *gridcityv1.AgentMessage_State:
		return "state"
	case *gridcityv1.AgentMessage_Heartbeat:
		return "heartbeat"
	case *gridcityv1.AgentMessage_CommandEvent:
		return "command_event"
	case *gridcityv1.AgentMessage_ProbeResult:
		return "probe_result"
	case nil:
		return "empty"
	}
	return "other"
}
