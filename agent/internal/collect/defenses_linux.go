package collect

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridcity/gridcity/agent/internal/defense"
	"github.com/gridcity/gridcity/agent/internal/hostquery"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// defensesTimeout bounds one collection: each tool has
// defense.ToolTimeout, and a fail2ban too old for `banned` is asked once
// per jail.
const defensesTimeout = 20 * time.Second

// defensesCollector reads what protects the host's SSH: sshd's
// authentication settings and the networks the firewall drops. The sshd
// part and the firewall part fail apart, each as a gap of its own
// ("defenses:sshd", "defenses:firewall", or the tool's: "defenses:fail2ban"),
// so the section is always sent with what could be read.
type defensesCollector struct {
	fsys       fs.FS  // where sshdConfig is read
	sshdConfig string // sshd's main config file
	run        defense.Runner
	find       func(tool string) (string, bool) // findTool, for hostTool
}

func newDefensesCollector(cfg Config, _ *slog.Logger) collector {
	c := &defensesCollector{fsys: os.DirFS("/"), sshdConfig: cfg.SSHDConfig, find: findTool}
	c.run = c.hostTool
	if !filepath.IsAbs(c.sshdConfig) {
		// A fixture's path, relative to the working directory.
		c.fsys = os.DirFS(".")
	}
	return c
}

func (c *defensesCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	ctx, cancel := context.WithTimeout(ctx, defensesTimeout)
	defer cancel()
	d := &gridcityv1.Defenses{}

	sshd, problems, err := defense.ReadSSHD(c.fsys, c.sshdConfig)
	switch {
	case err != nil:
		n.add("sshd", err.Error())
	default:
		d.Sshd = cleanSSHConfig(sshd)
		if len(problems) > 0 {
			n.add("sshd", strings.Join(problems, "; "))
		}
	}

	fw, fwNotes, err := defense.ReadFirewall(ctx, c.run)
	if ctx.Err() != nil && fw == nil {
		return fmt.Errorf("firewall: %w", ctx.Err())
	}
	if err != nil {
		n.add("firewall", err.Error())
	} else {
		d.Firewall = cleanFirewall(fw)
	}
	for _, note := range fwNotes {
		n.add(note.Part, note.Reason)
	}
	out.Defenses = d
	return nil
}

// cleanSSHConfig bounds the strings taken from config files: file names
// and "file:line".
func cleanSSHConfig(c *gridcityv1.SSHConfig) *gridcityv1.SSHConfig {
	c.PasswordAuthenticationFrom = clean(c.PasswordAuthenticationFrom, maxName)
	c.PermitRootLoginFrom = clean(c.PermitRootLoginFrom, maxName)
	c.KbdInteractiveAuthenticationFrom = clean(c.KbdInteractiveAuthenticationFrom, maxName)
	for i, f := range c.Files {
		c.Files[i] = clean(f, maxName)
	}
	return c
}

func cleanFirewall(fw *gridcityv1.Firewall) *gridcityv1.Firewall {
	for _, b := range fw.Blocks {
		b.By = clean(b.By, maxName)
	}
	return fw
}

// toolDirs are where the firewall tools are looked for, in the order of the
// PATH that hostquery.Query gives them.
var toolDirs = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// hostTool is the collector's defense.Runner: the tool found in toolDirs,
// run by hostquery.Query. fail2ban-client is not started when fail2ban's
// server is plainly down (its socket is missing): it is a Python program,
// and asking it every collection only to hear that cost the agent
// more CPU than all its other collectors together.
func (c *defensesCollector) hostTool(ctx context.Context, maxBytes int, tool string, args ...string) ([]byte, error) {
	path, ok := c.find(tool)
	if !ok {
		return nil, fmt.Errorf("%s: %w", tool, defense.ErrNotInstalled)
	}
	if tool == "fail2ban-client" {
		if err := defense.Fail2banStopped(c.fsys); err != nil {
			return nil, err
		}
	}
	out, _, err := hostquery.Query(ctx, maxBytes, append([]string{path}, args...)...)
	return out, err
}

// findTool returns the path of an executable named tool in toolDirs.
func findTool(tool string) (string, bool) {
	for _, dir := range toolDirs {
		p := dir + "/" + tool
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}
