package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/godbus/dbus/v5"

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

// listedUnit is one entry of ListUnits' a(ssssssouso).
type listedUnit struct {
	Name, Description, LoadState, ActiveState, SubState, Following string
	Path                                                           dbus.ObjectPath
	JobID                                                          uint32
	JobType                                                        string
	JobPath                                                        dbus.ObjectPath
}

const (
	systemdDest    = "org.freedesktop.systemd1"
	systemdManager = "org.freedesktop.systemd1.Manager"
	systemdUnit    = "org.freedesktop.systemd1.Unit"
)

// fetchFailedUnits lists the failed units and when each failed. Only this
// talks to D-Bus; failedUnits makes the section.
func fetchFailedUnits(ctx context.Context, addr string) ([]unitStatus, error) {
	var (
		conn *dbus.Conn
		err  error
	)
	if addr == "" {
		conn, err = dbus.ConnectSystemBus(dbus.WithContext(ctx))
	} else {
		conn, err = dbus.Connect(addr, dbus.WithContext(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("system bus: %w", err)
	}
	defer conn.Close()

	mgr := conn.Object(systemdDest, "/org/freedesktop/systemd1")
	var listed []listedUnit
	err = mgr.CallWithContext(ctx, systemdManager+".ListUnitsFiltered", 0, []string{"failed"}).Store(&listed)
	var dbusErr dbus.Error
	if errors.As(err, &dbusErr) && dbusErr.Name == "org.freedesktop.DBus.Error.UnknownMethod" {
		// systemd before 230 has no filter; failedUnits filters instead.
		err = mgr.CallWithContext(ctx, systemdManager+".ListUnits", 0).Store(&listed)
	}
	if err != nil {
		return nil, fmt.Errorf("systemd list units: %w", err)
	}

	var raw []unitStatus
	for _, l := range listed {
		if l.ActiveState != "failed" {
			continue
		}
		if len(raw) == maxFailedUnits {
			break
		}
		obj := conn.Object(systemdDest, l.Path)
		st := unitStatus{
			Name:            l.Name,
			Description:     l.Description,
			ActiveState:     l.ActiveState,
			SubState:        l.SubState,
			StateChangeUsec: unitTimestamp(ctx, obj, "StateChangeTimestamp"),
		}
		if st.StateChangeUsec == 0 {
			st.InactiveEnterUsec = unitTimestamp(ctx, obj, "InactiveEnterTimestamp")
		}
		raw = append(raw, st)
	}
	return raw, nil
}

// unitTimestamp reads a unit's timestamp property, 0 when systemd lacks it:
// a missing time costs the since field, not the unit.
func unitTimestamp(ctx context.Context, obj dbus.BusObject, prop string) uint64 {
	var v dbus.Variant
	if err := obj.CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, systemdUnit, prop).Store(&v); err != nil {
		return 0
	}
	t, _ := v.Value().(uint64)
	return t
}
