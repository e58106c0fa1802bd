package defense

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/agent/internal/hostquery"
)

// needTool skips a test that needs root and a program, except in CI as
// root, whose packages must provide it.
func needTool(t *testing.T, path, pkg string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: CI must install the Debian package %s", path, pkg)
		}
		t.Skipf("%s is missing (Debian package %s)", path, pkg)
	}
}

const sshd = "/usr/sbin/sshd"

// sshdSetup readies the running of `sshd -T` and `sshd -t`: it returns a
// temporary directory and a host key in it.
func sshdSetup(ctx context.Context, t *testing.T) (dir, key string) {
	t.Helper()
	needTool(t, sshd, "openssh-server")
	needTool(t, "/usr/bin/ssh-keygen", "openssh-client")
	// sshd checks its privilege separation directory even in test mode;
	// the service makes it when it starts.
	if _, err := os.Stat("/run/sshd"); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/sshd") })
	}
	dir = t.TempDir()
	key = filepath.Join(dir, "host_key")
	if _, _, err := hostquery.Query(ctx, 1<<16, "/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key); err != nil {
		t.Fatal(err)
	}
	return dir, key
}

// TestReadSSHDAgainstSSHD compares what ReadSSHD reads with what the real
// sshd says its settings are (sshd -T), for every case it should accept,
// and checks that sshd refuses the cases ReadSSHD reports problems with.
func TestReadSSHDAgainstSSHD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, key := sshdSetup(ctx, t)

	for i, tt := range sshdCases(t) {
		if tt.relative {
			// sshd resolves relative includes in the real /etc/ssh.
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(dir, strings.Repeat("c", i+1))
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				content = strings.ReplaceAll(content, "/etc/", root+"/etc/")
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, _, err := hostquery.Query(ctx, 1<<20, sshd, "-T", "-f", filepath.Join(root, "etc/ssh/sshd_config"), "-h", key)
			if tt.problems != "" {
				if err == nil {
					t.Errorf("sshd accepts a config with problems %q", tt.problems)
				}
				return
			}
			if err != nil {
				t.Fatalf("sshd -T: %v", err)
			}
			want := map[string]string{}
			for line := range bytes.Lines(out) {
				k, v, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
				want[k] = v
			}
			if want["permitrootlogin"] == "without-password" {
				want["permitrootlogin"] = "prohibit-password"
			}
			c, _, err := ReadSSHD(os.DirFS("/"), filepath.Join(root, "etc/ssh/sshd_config"))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{
				"passwordauthentication":       c.GetPasswordAuthentication(),
				"permitrootlogin":              c.GetPermitRootLogin(),
				"kbdinteractiveauthentication": c.GetKbdInteractiveAuthentication(),
				"usepam":                       c.GetUsePam(),
			}
			for k, v := range got {
				if want[k] != v {
					t.Errorf("%s: ReadSSHD says %q; sshd -T says %q", k, v, want[k])
				}
			}
		})
	}
}

// TestSSHDRefuses checks, line by line, that what ReadSSHD calls a line
// sshd refuses is one: sshd -t fails on it.
func TestSSHDRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, key := sshdSetup(ctx, t)
	for _, bad := range []string{
		"PasswordAuthentication maybe",
		"PermitRootLogin",
		"UsePAM yes no",
		`PermitRootLogin "yes`,
		"Match Group wheel\nUsePAM yes",
		"Match all extra",
		"Match",
		"Include " + dir + "/self\nKbdInteractiveAuthentication yes",
	} {
		config := filepath.Join(dir, "self")
		if err := os.WriteFile(config, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, problems, err := ReadSSHD(os.DirFS("/"), config)
		if err != nil || len(problems) == 0 {
			t.Errorf("%q: ReadSSHD reports no problem (error %v)", bad, err)
		}
		if _, _, err := hostquery.Query(ctx, 1<<20, sshd, "-t", "-f", config, "-h", key); err == nil {
			t.Errorf("%q: sshd accepts it; ReadSSHD says %q", bad, problems)
		}
	}
}
