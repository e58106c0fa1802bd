package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fleetSize is the fleet the issue asks about: every one of 50 servers is
// named in list_servers' default answer.
const fleetSize = 50

// TestFiftyRealAgents: 50 real agents on this machine, one coordinator.
// list_servers without arguments names every server (in structured and
// text content) within the answer budget; list_servers {"name"} is one
// server in full; and, as root, a file system on a loop device that the
// test fills shows in get_metrics with the time it will be full.
func TestFiftyRealAgents(t *testing.T) {
	t.Parallel()
	c := startCoordinatorWithConfig(t, "collect: {medium: 5s}\n")
	tok := c.token()
	join := c.joinLine("--reusable")
	names := make([]string, fleetSize)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%02d", i)
	}
	// The loop file system is mounted before the agents start, so that
	// each one reports it from its first medium tick.
	var fill string
	if os.Geteuid() == 0 {
		fill = loopFileSystem(t, 200)
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI runs as root; the filling-disk part needs root for a loop device")
	}
	agents := make([]*proc, len(names))
	for i, n := range names {
		agents[i] = startAgent(t, c, n, t.TempDir(), join)
	}
	t.Cleanup(func() { stopAll(agents) })
	cs, err := c.mcpClient(tok, "e2e-fleet")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if fill != "" {
		// Write 4 MiB every 2 s: about 120 MiB of 200 in a minute, so a
		// trend shows within two one-minute buckets and the disk is never
		// full during the test.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4<<20)
			for i := 0; i < 40; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Second):
				}
				f := filepath.Join(fill, fmt.Sprintf("part-%02d", i))
				if err := os.WriteFile(f, buf, 0o600); err != nil {
					t.Errorf("filling %s: %v", f, err)
					return
				}
				syncFS(f)
			}
		}()
		t.Cleanup(func() { close(stop); wg.Wait() })
	}

	t.Run("list_servers names all fifty", func(t *testing.T) {
		var out struct {
			Total, Online, Matched int
			Rows                   []struct{ Name, Status string }
			Others                 []string
			Truncated              bool
		}
		var text string
		eventually(t, 90*time.Second, "all 50 online in list_servers' default answer", func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_servers", Arguments: map[string]any{}})
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("list_servers error: %+v", res.Content)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			text = textOf(res)
			if len(sc) > 16000 || len(text) > 16000 {
				return fmt.Errorf("answer over budget: structured %d, text %d characters", len(sc), len(text))
			}
			out.Rows, out.Others = nil, nil
			if err := json.Unmarshal(sc, &out); err != nil {
				return err
			}
			if out.Total != fleetSize || out.Online != fleetSize {
				return fmt.Errorf("total %d, online %d", out.Total, out.Online)
			}
			return nil
		})
		named := map[string]bool{}
		for _, r := range out.Rows {
			named[r.Name] = true
		}
		for _, n := range out.Others {
			named[n] = true
		}
		for _, n := range names {
			if !named[n] {
				t.Errorf("%s is not named in the structured answer (rows %d, others %d, truncated %v)", n, len(out.Rows), len(out.Others), out.Truncated)
			}
			if !strings.Contains(text, n) {
				t.Errorf("%s is not named in the text answer", n)
			}
		}
		if out.Truncated || out.Matched != fleetSize {
			t.Errorf("matched %d, truncated %v; want all %d and nothing left out", out.Matched, out.Truncated, fleetSize)
		}
	})

	t.Run("list_servers name is one server in full", func(t *testing.T) {
		var v fullView
		eventually(t, 60*time.Second, "fleet-07 in full with disks, ports and top processes", func() error {
			var err error
			v, err = oneServer(cs, "fleet-07")
			if err != nil {
				return err
			}
			if len(v.Disks) == 0 || len(v.Listening) == 0 || v.Memory == nil || v.CPU == nil || v.TopProcesses == nil {
				return fmt.Errorf("incomplete: %d disks, %d listeners, memory %v, cpu %v, top processes %v",
					len(v.Disks), len(v.Listening), v.Memory != nil, v.CPU != nil, v.TopProcesses != nil)
			}
			if fill != "" && !v.hasDisk(fill) {
				return fmt.Errorf("the loop file system %s is not among its disks", fill)
			}
			return nil
		})
		if v.Name != "fleet-07" || v.Status != "online" {
			t.Errorf("got %s %s", v.Name, v.Status)
		}
	})

	t.Run("get_metrics says when the filling disk is full", func(t *testing.T) {
		if fill == "" {
			t.Skip("needs root for a loop device (make e2e as root runs it)")
		}
		type diskAnswer struct {
			Mount, FullIn, FullAt, Note string
			UsedPercent, TrendPerHour   float64
			NotFilling                  bool
		}
		var disk diskAnswer
		var points int
		// Two one-minute buckets are needed for a trend: at most two
		// minutes after the filling starts, plus the agents' medium tick.
		eventually(t, 200*time.Second, "get_metrics gives the loop disk a fullIn", func() error {
			var out struct {
				Series []struct {
					Metric string
					Points [][4]any
				}
				Disks []json.RawMessage
			}
			if err := callTool(cs, "get_metrics", map[string]any{"target": "fleet-00", "since": "15m"}, &out); err != nil {
				return err
			}
			for _, s := range out.Series {
				if s.Metric == "disk:"+fill {
					points = len(s.Points)
				}
			}
			for _, d := range out.Disks {
				// Each answer afresh: notFilling is left out when false,
				// so an earlier answer's true would otherwise stay.
				disk = diskAnswer{}
				json.Unmarshal(d, &disk)
				if disk.Mount == fill {
					if disk.FullIn == "" {
						return fmt.Errorf("%s: %s", fill, d)
					}
					return nil
				}
			}
			return fmt.Errorf("no disk %s among %d", fill, len(out.Disks))
		})
		if points < 2 || disk.TrendPerHour <= 0 || disk.NotFilling || disk.FullAt == "" || disk.UsedPercent <= 0 {
			t.Errorf("loop disk with %d points: %+v; want a rising trend and a time it is full", points, disk)
		}
		if !fullInForm.MatchString(disk.FullIn) {
			t.Errorf("fullIn %q is not a duration like 5h20m or 3d4h", disk.FullIn)
		}
	})
}

// fullInForm is get_metrics' way of writing a time to full.
var fullInForm = regexp.MustCompile(`^([0-9]+d)?([0-9]+h)?([0-9]+m)?$`)

// fullView is what the e2e tests read of a server's whole view.
type fullView struct {
	serverView
	CPU          *struct{ Cores int }
	Memory       *struct{ TotalBytes uint64 }
	TopProcesses *struct{ ByCPU, ByMemory []processView }
}

func (v fullView) hasDisk(mount string) bool {
	for _, d := range v.Disks {
		if d["mount"] == mount {
			return true
		}
	}
	return false
}

// oneServer is list_servers {"name"}: the server in full.
func oneServer(cs *mcp.ClientSession, name string) (fullView, error) {
	var out struct{ Servers []fullView }
	if err := callTool(cs, "list_servers", map[string]any{"name": name}, &out); err != nil {
		return fullView{}, err
	}
	if len(out.Servers) != 1 || out.Servers[0].Name != name {
		return fullView{}, fmt.Errorf("list_servers {name: %s} gave %d views", name, len(out.Servers))
	}
	return out.Servers[0], nil
}

// textOf is a tool answer's text content.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// loopFileSystem makes an ext4 file system of sizeMiB on a loop device,
// mounts it under the test's temporary folder and removes it at the end.
func loopFileSystem(t *testing.T, sizeMiB int) string {
	t.Helper()
	for _, p := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found: CI installs e2fsprogs and mount", p)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "fill")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(int64(sizeMiB) << 20)
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o loop (the kernel needs loop devices; CI runs as root on a machine that has them): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// stopAll stops the processes at once rather than one after another.
func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
}

// syncFS flushes a written file so that statfs counts its blocks.
func syncFS(path string) {
	if f, err := os.Open(path); err == nil {
		f.Sync()
		f.Close()
	}
}
