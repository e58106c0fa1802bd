package e2e

// The process behind a busy host: a real agent on this machine, CPU hogs
// (busy loops, one per core) and a memory hog (a process holding 300 MiB),
// and the coordinator's answers naming them by pid.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memHogEnv makes the test binary a memory hog (see TestMain): it holds
// that many MiB, touched, says "ready" and waits for its stdin to close.
const memHogEnv = "GRIDCITY_E2E_MEMHOG_MIB"

func memHog(mib int) {
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(b)
}

// startHog starts cmd and kills it when the test ends.
func startHog(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

type processView struct {
	PID        int
	Name, Unit string
	CPUPercent float64
	RSSBytes   uint64
}

// topProcesses calls list_servers {"name"} and returns the server's top processes.
func topProcesses(cs *mcp.ClientSession, name string) (byCPU, byMemory []processView, err error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_servers", Arguments: map[string]any{"name": name}})
	if err != nil {
		return nil, nil, err
	}
	if res.IsError {
		return nil, nil, fmt.Errorf("list_servers error: %+v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Servers []struct {
			Name         string
			TopProcesses *struct{ ByCPU, ByMemory []processView }
			Gaps         []struct{ Check, Reason string }
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, nil, err
	}
	if len(out.Servers) != 1 || out.Servers[0].TopProcesses == nil {
		return nil, nil, fmt.Errorf("no top processes for %s: %s", name, b)
	}
	return out.Servers[0].TopProcesses.ByCPU, out.Servers[0].TopProcesses.ByMemory, nil
}

// culpritLine is an overloaded diagnosis's evidence about one process.
var culpritLine = regexp.MustCompile(`^"([^"]*)" \(pid (\d+)[,)].* uses `)

// TestDiagnoseNamesTheHogs: list_servers {"name"} lists a CPU hog among the
// busiest processes and the memory hog as the largest; diagnose finds the
// host's CPU busy, names a hog with its pid as evidence, offers to look at
// it (ps -p PID), and names the memory hog as the largest process.
func TestDiagnoseNamesTheHogs(t *testing.T) {
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "web-1", "online", 20*time.Second)

	var cpuHogs []int
	for range min(runtime.NumCPU(), 4) {
		cpuHogs = append(cpuHogs, startHog(t, exec.Command("sh", "-c", "while :; do :; done")))
	}
	mem := exec.Command(os.Args[0], "-test.run=^$")
	mem.Env = append(os.Environ(), memHogEnv+"=300")
	stdin, err := mem.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := mem.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	memHogPid := startHog(t, mem)
	t.Cleanup(func() { stdin.Close() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("memory hog: %q, %v", line, err)
	}
	isHog := func(pid int) bool { return slices.Contains(cpuHogs, pid) }

	cs, err := c.mcpClient(tok, "e2e-processes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	eventually(t, 90*time.Second, "list_servers names the hogs", func() error {
		byCPU, byMemory, err := topProcesses(cs, "web-1")
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(byCPU, func(p processView) bool { return isHog(p.PID) && p.Name == "sh" && p.CPUPercent >= 10 }) {
			return fmt.Errorf("no CPU hog (pids %v) among the busiest: %+v", cpuHogs, byCPU)
		}
		if len(byMemory) == 0 || byMemory[0].PID != memHogPid || byMemory[0].RSSBytes < 250<<20 {
			return fmt.Errorf("the memory hog (pid %d) is not the largest: %+v", memHogPid, byMemory)
		}
		return nil
	})

	eventually(t, 90*time.Second, "diagnose names the hogs", func() error {
		rep, raw, err := diagnose(cs, "web-1")
		if err != nil {
			return err
		}
		var problems []string
		host := rep.rung("host").Detail
		if !strings.Contains(host, "largest process ") || !strings.Contains(host, "(pid "+strconv.Itoa(memHogPid)) {
			problems = append(problems, fmt.Sprintf("the host rung does not name the memory hog (pid %d)", memHogPid))
		}
		// The culprits named as evidence, the busiest first: a CPU hog
		// among them (other processes on a shared machine may be busier),
		// and a look at each of the first two among the fixes.
		var culprits []int
		hogNamed := false
		for _, d := range rep.Diagnoses {
			if !strings.Contains(d.Summary, "is overloaded") {
				continue
			}
			for _, e := range d.Evidence {
				if m := culpritLine.FindStringSubmatch(e); m != nil {
					pid, _ := strconv.Atoi(m[2])
					culprits = append(culprits, pid)
					hogNamed = hogNamed || isHog(pid) && m[1] == "sh"
				}
			}
		}
		if !hogNamed {
			problems = append(problems, fmt.Sprintf("no overloaded diagnosis names a CPU hog (pids %v)", cpuHogs))
		}
		for _, pid := range culprits[:min(2, len(culprits))] {
			if !slices.ContainsFunc(rep.Fixes, func(f struct {
				Summary, Command, Runbook, Server, Via, Verification string
				Verified, ReadOnly                                   bool
			}) bool {
				return f.ReadOnly && f.Server == "web-1" && f.Command == "ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p "+strconv.Itoa(pid)
			}) {
				problems = append(problems, fmt.Sprintf("no fix looks at pid %d", pid))
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s:\n%s", strings.Join(problems, "; "), raw)
		}
		t.Logf("diagnose web-1:\n%s", raw)
		return nil
	})
}
