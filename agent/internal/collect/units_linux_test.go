package collect

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// fakeSystemd answers as systemd's manager and units do on the bus.
type fakeSystemd struct {
	units    []listedUnitWire
	filtered bool // ListUnitsFiltered exists (systemd 230 and later)
}

// listedUnitWire is an entry of ListUnits' a(ssssssouso).
type listedUnitWire struct {
	Name, Description, LoadState, ActiveState, SubState, Following string
	Path                                                           dbus.ObjectPath
	JobID                                                          uint32
	JobType                                                        string
	JobPath                                                        dbus.ObjectPath
}

func (f *fakeSystemd) ListUnits() ([]listedUnitWire, *dbus.Error) { return f.units, nil }

type filteredManager struct{ *fakeSystemd }

func (f filteredManager) ListUnitsFiltered(states []string) ([]listedUnitWire, *dbus.Error) {
	var out []listedUnitWire
	for _, u := range f.units {
		for _, s := range states {
			if u.ActiveState == s {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

type unitProps map[string]uint64

func (p unitProps) Get(iface, prop string) (dbus.Variant, *dbus.Error) {
	if v, ok := p[prop]; ok && iface == "org.freedesktop.systemd1.Unit" {
		return dbus.MakeVariant(v), nil
	}
	return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{"no " + prop})
}

// startBus starts a private dbus-daemon (the real one, as on a server) and
// returns its address.
func startBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dbus-daemon is not installed; .ci/run installs it")
		}
		t.Skip("dbus-daemon is not installed (apt-get install dbus-daemon)")
	}
	dir := t.TempDir()
	// A bus of its own configuration: no service directories, so that a
	// missing name is never started from the test host's services.
	config := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(config, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=`+filepath.Join(dir, "bus")+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+config, "--nofork", "--nopidfile", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(addr)
}

// serveSystemd claims org.freedesktop.systemd1 on the bus at addr and
// answers as f.
func serveSystemd(t *testing.T, addr string, f *fakeSystemd, props map[dbus.ObjectPath]unitProps) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var mgr any = f
	if f.filtered {
		mgr = filteredManager{f}
	}
	if err := conn.Export(mgr, "/org/freedesktop/systemd1", systemdManager); err != nil {
		t.Fatal(err)
	}
	for path, p := range props {
		if err := conn.Export(p, path, "org.freedesktop.DBus.Properties"); err != nil {
			t.Fatal(err)
		}
	}
	if reply, err := conn.RequestName(systemdDest, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("request name: %v %v", reply, err)
	}
}

// The failed units are read over a real bus from a systemd with and without
// ListUnitsFiltered, with their failure times.
func TestFetchFailedUnitsOverBus(t *testing.T) {
	units := []listedUnitWire{
		{Name: "web.service", Description: "The web server", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Path: "/org/freedesktop/systemd1/unit/web_2eservice", JobPath: "/"},
		{Name: "db.service", Description: "The database", LoadState: "loaded", ActiveState: "active", SubState: "running", Path: "/org/freedesktop/systemd1/unit/db_2eservice", JobPath: "/"},
		{Name: "old.service", Description: "Old: no StateChangeTimestamp", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Path: "/org/freedesktop/systemd1/unit/old_2eservice", JobPath: "/"},
		{Name: "bare.service", Description: "", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Path: "/org/freedesktop/systemd1/unit/bare_2eservice", JobPath: "/"},
	}
	props := map[dbus.ObjectPath]unitProps{
		"/org/freedesktop/systemd1/unit/web_2eservice":  {"StateChangeTimestamp": 1_700_000_000_000_000},
		"/org/freedesktop/systemd1/unit/old_2eservice":  {"InactiveEnterTimestamp": 1_600_000_000_000_000},
		"/org/freedesktop/systemd1/unit/bare_2eservice": {},
	}
	want := []unitStatus{
		{Name: "web.service", Description: "The web server", ActiveState: "failed", SubState: "failed", StateChangeUsec: 1_700_000_000_000_000},
		{Name: "old.service", Description: "Old: no StateChangeTimestamp", ActiveState: "failed", SubState: "failed", InactiveEnterUsec: 1_600_000_000_000_000},
		{Name: "bare.service", ActiveState: "failed", SubState: "failed"},
	}
	for _, filtered := range []bool{true, false} {
		addr := startBus(t)
		serveSystemd(t, addr, &fakeSystemd{units: units, filtered: filtered}, props)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := fetchFailedUnits(ctx, addr)
		cancel()
		if err != nil {
			t.Fatalf("filtered %v: %v", filtered, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("filtered %v: got %+v; want %+v", filtered, got, want)
		}
	}
}

// Without systemd on the bus, the fetch fails with the bus's error rather
// than hanging; with no bus at all, it fails at once.
func TestFetchFailedUnitsErrors(t *testing.T) {
	addr := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := fetchFailedUnits(ctx, addr); err == nil || !strings.Contains(err.Error(), "systemd list units") {
		t.Errorf("no systemd on the bus: got %v; want a list units error", err)
	}
	if _, err := fetchFailedUnits(ctx, "unix:path="+filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "system bus") {
		t.Errorf("no bus: got %v; want a system bus error", err)
	}
}
