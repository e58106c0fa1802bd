package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/gridcity/gridcity/agent/internal/sysbus"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// unitsTimeout bounds one conversation with systemd; a wedged PID 1 is
// exactly when the agent must keep working.
const unitsTimeout = 10 * time.Second

// unitsCollector asks systemd for its failed units over the system bus. A
// connection is made per sample: every 30 s it costs little, and a bus or
// systemd restart needs no reconnection logic.
type unitsCollector struct {
	systemdDir, busAddr string
}

func newUnitsCollector(cfg Config, _ *slog.Logger) collector {
	return &unitsCollector{systemdDir: cfg.SystemdDir, busAddr: cfg.SystemBus}
}

func (c *unitsCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, _ *notes) error {
	if _, err := os.Stat(c.systemdDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no systemd: %s does not exist", c.systemdDir)
	} else if err != nil {
		return fmt.Errorf("no systemd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, unitsTimeout)
	defer cancel()
	raw, err := fetchFailedUnits(ctx, c.busAddr)
	if err != nil {
		return err
	}
	out.FailedUnits = failedUnits(raw)
	return nil
}

const (
	systemdDest    = "org.freedesktop.systemd1"
	systemdPath    = "/org/freedesktop/systemd1"
	systemdManager = "org.freedesktop.systemd1.Manager"
	systemdUnit    = "org.freedesktop.systemd1.Unit"
)

// fetchFailedUnits lists the failed units and when each failed. Only this
// talks to D-Bus; failedUnits makes the section.
func fetchFailedUnits(ctx context.Context, addr string) ([]unitStatus, error) {
	if addr == "" {
		a, err := sysbus.SystemBusAddress()
		if err != nil {
			return nil, fmt.Errorf("system bus: %w", err)
		}
		addr = a
	}
	conn, err := sysbus.Connect(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("system bus: %w", err)
	}
	defer conn.Close()

	reply, err := conn.Call(systemdDest, systemdPath, systemdManager, "ListUnitsFiltered", []string{"failed"})
	var busErr *sysbus.Error
	if errors.As(err, &busErr) && busErr.Name == "org.freedesktop.DBus.Error.UnknownMethod" {
		// systemd before 230 has no filter; failedUnits filters instead.
		reply, err = conn.Call(systemdDest, systemdPath, systemdManager, "ListUnits")
	}
	if err != nil {
		return nil, fmt.Errorf("systemd list units: %w", err)
	}
	listed, err := listedUnits(reply)
	if err != nil {
		return nil, fmt.Errorf("systemd list units: %w", err)
	}

	var raw []unitStatus
	for _, l := range listed {
		if l.activeState != "failed" {
			continue
		}
		if len(raw) == maxFailedUnits {
			break
		}
		st := unitStatus{
			Name:            l.name,
			Description:     l.description,
			ActiveState:     l.activeState,
			SubState:        l.subState,
			StateChangeUsec: unitTimestamp(conn, l.path, "StateChangeTimestamp"),
		}
		if st.StateChangeUsec == 0 {
			st.InactiveEnterUsec = unitTimestamp(conn, l.path, "InactiveEnterTimestamp")
		}
		raw = append(raw, st)
	}
	return raw, nil
}

// listedUnit is what the agent reads of an entry of ListUnits'
// a(ssssssouso): name, description, load, active and sub state, following,
// object path, job id, job type, job path.
type listedUnit struct {
	name, description, activeState, subState string
	path                                     string
}

func listedUnits(reply []any) ([]listedUnit, error) {
	if len(reply) != 1 {
		return nil, fmt.Errorf("reply of %d values, want 1", len(reply))
	}
	entries, ok := reply[0].([]any)
	if !ok {
		return nil, fmt.Errorf("reply of %T, want a list of units", reply[0])
	}
	out := make([]listedUnit, 0, len(entries))
	for _, e := range entries {
		f, ok := e.([]any)
		if !ok || len(f) != 10 {
			return nil, errors.New("a unit is not (ssssssouso)")
		}
		var u listedUnit
		var p sysbus.ObjectPath
		if u.name, ok = f[0].(string); !ok {
			return nil, errors.New("a unit's name is not a string")
		}
		u.description, _ = f[1].(string)
		u.activeState, _ = f[3].(string)
		u.subState, _ = f[4].(string)
		if p, ok = f[6].(sysbus.ObjectPath); !ok {
			return nil, errors.New("a unit's path is not an object path")
		}
		u.path = string(p)
		out = append(out, u)
	}
	return out, nil
}

// unitTimestamp reads a unit's timestamp property, 0 when systemd lacks it:
// a missing time costs the since field, not the unit.
func unitTimestamp(conn *sysbus.Conn, path, prop string) uint64 {
	reply, err := conn.Call(systemdDest, path, "org.freedesktop.DBus.Properties", "Get", systemdUnit, prop)
	if err != nil || len(reply) != 1 {
		return 0
	}
	v, _ := reply[0].(sysbus.Variant)
	t, _ := v.Value.(uint64)
	return t
}
