package link

import (
	"context"

	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/agent/internal/collect"
)

// Options describe the agent to the coordinator.
type Options struct {
	Version  string
	District string
	RunAs    string
	// Commands runs approved commands; nil when this agent runs none
	// (commands: false), and CommandsOff says why.
	Commands    *Commands
	CommandsOff string
	// Probes runs the probes the coordinator assigns to this server; false
	// (probes: false in the config) leaves them to the coordinator.
	Probes bool
	// BackoffBase and BackoffMax bound the reconnect delay (defaults 1 s, 60 s).
	BackoffBase, BackoffMax time.Duration
	// StateDir keeps the addresses of the fleet's coordinators across
	// restarts ("": in memory only).
	StateDir string
}

// Client keeps an agent connected to its coordinator.
type Client struct {
	id     *Identity
	opts   Options
	set    *collect.Set
	logger *slog.Logger
	probes *Probes // nil when probes are off
	// coords is where to connect: the enrollment address, then the other
	// coordinators of the fleet.
	coords *coordinators

	// state is the merged full state last sent (or collected to send); it
	// survives reconnects so that a new stream does not wait for the slow
	// tiers again.
	mu    sync.Mutex
	state *gridcityv1.StateUpdate
}

// NewClient returns a client for an enrolled identity.
func NewClient(id *Identity, set *collect.Set, opts Options, logger *slog.Logger) *Client {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = time.Minute
	}
	c := &Client{id: id, opts: opts, set: set, logger: logger}
	coords, err := loadCoordinators(opts.StateDir, id.Coordinator, id.Name)
	if err != nil {
		logger.Warn("starting with the enrollment address alone", "coordinator", id.Coordinator, "err", err)
	}
	c.coords = coords
	if opts.Probes {
		c.probes = NewProbes(logger)
	}
	return c
}

// PermanentError is a refusal that retrying cannot fix (revoked or unknown
// certificate): the operator has to act.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Run connects and reconnects until ctx ends or the coordinator refuses
// this agent for good. It starts with the enrollment address; when a
// coordinator cannot be reached or its stream ends, the next attempt, after
// the backoff, goes to the next coordinator of the fleet it was told of, in
// turn. Each is verified against the same pinned CA.
func (c *Client) Run(ctx context.Context) error {
	attempt := 0
	addr := c.id.Coordinator
	for {
		start := time.Now()
		err := c.session(ctx, addr)
		if ctx.Err() != nil {
			return nil
		}
		end := sessionEnd(err, time.Since(start))
		if end.permanent {
			return &PermanentError{Err: fmt.Errorf("the coordinator at %s refused this agent: %s", addr, status.Convert(err).Message())}
		}
		failed := addr
		addr = c.coords.after(addr)
		if end.resetBackoff {
			attempt = 0
		}
		d := Backoff(attempt, c.opts.BackoffBase, c.opts.BackoffMax)
		attempt++
		if end.refused {
			// The coordinator refused something this agent sent (a value
			// out of range, a list too long) and kept its earlier state.
			// Sending the same again would be refused again: the state is
			// collected afresh for the next stream, and the backoff keeps
			// growing so that a value that stays bad costs a stream a
			// minute, not a loop.
			c.forgetState()
			c.logger.Error("the coordinator refused what this agent sent; reconnecting with freshly collected state. "+
				"A value out of range usually means the host's clock is off (check NTP) or a collector misread the host: report it with this line",
				"coordinator", failed, "refusal", status.Convert(err).Message(), "next", addr, "in", d.Round(time.Millisecond))
		} else {
			c.logger.Warn("no connection to the coordinator; retrying", "coordinator", failed, "err", err, "next", addr, "in", d.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// ending is what follows the end of a stream.
type ending struct {
	// permanent: the certificate was revoked or is unknown; retrying
	// cannot help.
	permanent bool
	// refused: the coordinator refused something this agent sent
	// (InvalidArgument) and kept its earlier state.
	refused bool
	// resetBackoff: the stream worked for a while, so the next attempt
	// waits the shortest delay again. Never after a refusal: the same
	// state would be refused at once, and the backoff must keep growing.
	resetBackoff bool
}

// sessionEnd reads the error a stream ended with, after it lasted that long.
func sessionEnd(err error, lasted time.Duration) ending {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return ending{permanent: true}
	case codes.InvalidArgument:
		return ending{refused: true}
	}
	return ending{resetBackoff: lasted > time.Minute}
}

// forgetState drops the remembered state, so that the next stream opens
// with a full collection rather than what the coordinator refused.
func (c *Client) forgetState() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = nil
}

// Backoff is the delay before reconnect attempt n: exponential from base,
// capped at max, with "equal jitter" (half fixed, half random) so that a
// fleet that lost its coordinator at once does not return at once.
func Backoff(n int, base, max time.Duration) time.Duration {
	d := max
	if n < 30 {
		d = min(base<<n, max)
	}
	half := d / 2
	return half + rand.N(half+1)
}

// session runs one stream with the coordinator at addr until it breaks.
func (c *Client) session(ctx context.Context, addr string) error {
	tlsCfg, err := c.id.tlsConfig()
	if err != nil {
		return &PermanentError{Err: err}
	}
	// Collect before dialing, so that hello and the full state arrive
	// together and the server is never online without facts.
	full := c.fullState(ctx)
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
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
	hello := &gridcityv1.Hello{
		Name: c.id.Name, AgentVersion: c.opts.Version, District: c.opts.District, Capabilities: []string{"state"},
	}
	var outbox chan *gridcityv1.AgentMessage // nil (never ready) without commands
	if cmds := c.opts.Commands; cmds != nil {
		hello.CommandsEnabled, hello.RunAs = true, c.opts.RunAs
		hello.Capabilities = append(hello.Capabilities, "commands")
		hello.Journal = cmds.Journal()
		outbox = cmds.out
	}
	var probeOut chan *gridcityv1.AgentMessage // nil (never ready) without probes
	if c.probes != nil {
		hello.Capabilities = append(hello.Capabilities, "probes")
		probeOut = c.probes.out
		// Probes belong to the stream that assigned them; the next one
		// sends its own settings.
		defer c.probes.Stop()
	}
	if err := stream.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Hello{Hello: hello}}); err != nil {
		return recvError(stream, err)
	}
	if err := stream.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: full}}); err != nil {
		return recvError(stream, err)
	}
	c.logger.Info("connected to the coordinator", "coordinator", addr, "name", c.id.Name)

	in := make(chan *gridcityv1.CoordinatorMessage)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	changes := make(chan *gridcityv1.StateUpdate, 8)
	settings := make(chan *gridcityv1.Settings, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { c.collectLoop(ctx, settings, changes) })

	heartbeat := 5 * time.Second
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	lastHeard := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case m := <-in:
			lastHeard = time.Now()
			if s := m.GetSettings(); s != nil {
				if hb := time.Duration(s.GetHeartbeatIntervalSeconds()) * time.Second; hb > 0 && hb != heartbeat {
					heartbeat = hb
					beat.Reset(hb)
				}
				select {
				case <-settings:
				default:
				}
				settings <- s
				if c.probes != nil {
					c.probes.Set(ctx, s.GetProbes())
				}
			}
			if r := m.GetReplicas(); r != nil {
				if changed, err := c.coords.set(r); err != nil {
					// The list known before stays; the stream goes on.
					c.logger.Warn("the coordinator's list of coordinators was not kept", "coordinator", addr, "err", err)
				} else if changed {
					c.logger.Info("coordinators of this fleet", "replicas", r.GetGrpcAddresses())
				}
			}
			if rp := m.GetRunProbe(); rp != nil && c.probes != nil {
				c.probes.RunOnce(ctx, rp.GetProbe())
			}
			if err := c.handleCommand(ctx, stream, m); err != nil {
				return err
			}
		case m := <-outbox:
			if err := stream.Send(m); err != nil {
				return err
			}
		case m := <-probeOut:
			if err := stream.Send(m); err != nil {
				return err
			}
		case u := <-changes:
			if err := stream.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: u}}); err != nil {
				return err
			}
		case <-beat.C:
			// The coordinator answers every heartbeat; three unanswered
			// ones mean the path is dead even if TCP has not noticed.
			if silent := time.Since(lastHeard); silent > 3*heartbeat+5*time.Second {
				return fmt.Errorf("coordinator silent for %s", silent.Round(time.Second))
			}
			if err := stream.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{SentUnixMs: time.Now().UnixMilli()}}}); err != nil {
				return err
			}
		}
	}
}

// handleCommand acts on the command messages of the coordinator.
func (c *Client) handleCommand(ctx context.Context, stream grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage], m *gridcityv1.CoordinatorMessage) error {
	cmds := c.opts.Commands
	switch b := m.Body.(type) {
	case *gridcityv1.CoordinatorMessage_RunCommand:
		if cmds == nil {
			reason := "commands are off on this server (commands: false in its config)"
			if c.opts.CommandsOff != "" {
				reason = c.opts.CommandsOff
			}
			return stream.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_CommandEvent{CommandEvent: &gridcityv1.CommandEvent{
				RequestId: b.RunCommand.GetRequestId(), Kind: gridcityv1.CommandEvent_KIND_REFUSED, Reason: reason}}})
		}
		cmds.Run(ctx, b.RunCommand)
	case *gridcityv1.CoordinatorMessage_CancelCommand:
		if cmds != nil {
			cmds.Cancel(b.CancelCommand)
		}
	case *gridcityv1.CoordinatorMessage_JournalAck:
		if cmds != nil {
			cmds.Forget(b.JournalAck.GetForget())
		}
	}
	return nil
}

// recvError prefers the status the server sent (why it closed the stream)
// over the local send error, which only says the stream is gone.
func recvError(stream grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage], sendErr error) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	return sendErr
}

// fullState returns the state to open a stream with: the first time every
// tier but the package manager's (which can take seconds; collectLoop runs
// it next), afterwards the remembered state with fresh cheap facts.
func (c *Client) fullState(ctx context.Context) *gridcityv1.StateUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		c.state = c.set.Collect(ctx, collect.TierFast, collect.TierMedium, collect.TierSlow)
	} else {
		collect.Merge(c.state, c.set.Collect(ctx, collect.TierFast, collect.TierMedium))
	}
	full := proto.Clone(c.state).(*gridcityv1.StateUpdate)
	full.Full = true
	return full
}

// collectLoop samples each tier at its interval and queues what changed.
// The package-manager tier runs in its own goroutine so that a slow apt
// never delays the cheap samples.
func (c *Client) collectLoop(ctx context.Context, settings <-chan *gridcityv1.Settings, out chan<- *gridcityv1.StateUpdate) {
	iv := map[collect.Tier]time.Duration{
		collect.TierFast: 5 * time.Second, collect.TierMedium: 30 * time.Second,
		collect.TierSlow: 5 * time.Minute, collect.TierUpdates: 30 * time.Minute,
	}
	tickers := map[collect.Tier]*time.Ticker{}
	for t, d := range iv {
		tickers[t] = time.NewTicker(d)
		defer tickers[t].Stop()
	}
	updatesDone := make(chan *gridcityv1.StateUpdate, 1)
	updatesBusy := false
	runUpdates := func() {
		if updatesBusy {
			return
		}
		updatesBusy = true
		go func() {
			uctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			updatesDone <- c.set.Collect(uctx, collect.TierUpdates)
		}()
	}
	c.mu.Lock()
	if c.state.Updates == nil {
		runUpdates() // not collected yet: the stream opened without it
	}
	c.mu.Unlock()
	emit := func(next *gridcityv1.StateUpdate) {
		c.mu.Lock()
		diff := collect.Changes(c.state, next)
		if diff != nil {
			collect.Merge(c.state, diff)
		}
		c.mu.Unlock()
		if diff == nil {
			return
		}
		select {
		case out <- diff:
		case <-ctx.Done():
		}
	}
	for {
		var tier collect.Tier
		select {
		case <-ctx.Done():
			return
		case s := <-settings:
			for t, d := range map[collect.Tier]uint32{collect.TierFast: s.GetFastIntervalSeconds(), collect.TierMedium: s.GetMediumIntervalSeconds(),
				collect.TierSlow: s.GetSlowIntervalSeconds(), collect.TierUpdates: s.GetUpdatesIntervalSeconds()} {
				if d > 0 && time.Duration(d)*time.Second != iv[t] {
					iv[t] = time.Duration(d) * time.Second
					tickers[t].Reset(iv[t])
				}
			}
			continue
		case u := <-updatesDone:
			updatesBusy = false
			emit(u)
			continue
		case <-tickers[collect.TierUpdates].C:
			runUpdates()
			continue
		case <-tickers[collect.TierFast].C:
			tier = collect.TierFast
		case <-tickers[collect.TierMedium].C:
			tier = collect.TierMedium
		case <-tickers[collect.TierSlow].C:
			tier = collect.TierSlow
		}
		emit(c.set.Collect(ctx, tier))
	}
}
