package defense

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

func TestFail2banSocket(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no configuration", nil, DefaultFail2banSocket},
		{"the packaged file", map[string]string{
			"etc/fail2ban/fail2ban.conf": "[DEFAULT]\n\n[Definition]\n# Option: socket\nloglevel = INFO\nsocket = /var/run/fail2ban/fail2ban.sock\npidfile = /var/run/fail2ban/fail2ban.pid\n",
		}, "/var/run/fail2ban/fail2ban.sock"},
		{"a .local overrides the .conf", map[string]string{
			"etc/fail2ban/fail2ban.conf":  "[Definition]\nsocket = /var/run/fail2ban/fail2ban.sock\n",
			"etc/fail2ban/fail2ban.local": "[Definition]\nSocket: /run/f2b/f2b.sock ; moved\n",
		}, "/run/f2b/f2b.sock"},
		{"drop-ins: conf, d/*.conf, local, d/*.local in that order", map[string]string{
			"etc/fail2ban/fail2ban.conf":        "[Definition]\nsocket = /a.sock\n",
			"etc/fail2ban/fail2ban.d/b.local":   "[Definition]\nsocket = /d-b-local.sock\n",
			"etc/fail2ban/fail2ban.d/a.conf":    "[Definition]\nsocket = /d-a-conf.sock\n",
			"etc/fail2ban/fail2ban.local":       "[Definition]\nsocket = /local.sock\n",
			"etc/fail2ban/fail2ban.d/z.conf":    "[Definition]\nsocket = /d-z-conf.sock\n",
			"etc/fail2ban/fail2ban.d/a.local":   "[Definition]\nsocket = /d-a-local.sock # inline\n",
			"etc/fail2ban/fail2ban.d/README.md": "[Definition]\nsocket = /not-read.sock\n",
		}, "/d-b-local.sock"},
		{"other sections, comments, and values that are not a path", map[string]string{
			"etc/fail2ban/fail2ban.conf":  "[Thread]\nsocket = /thread.sock\n[Definition]\n;socket = /commented.sock\n#socket = /commented2.sock\n",
			"etc/fail2ban/fail2ban.local": "[Definition]\nsocket = %(here)s/x.sock\n[Definition]\nsocket = relative.sock\nsocketx = /other.sock\n",
		}, DefaultFail2banSocket},
		{"a huge line and binary junk do not stop the read", map[string]string{
			"etc/fail2ban/fail2ban.conf":  "[Definition]\n" + strings.Repeat("x", 100<<10) + "\n\x00\xff\xfe\n",
			"etc/fail2ban/fail2ban.local": "[Definition]\nsocket = /after.sock\n",
		}, "/after.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			if got := Fail2banSocket(fsys, "etc/fail2ban"); got != tc.want {
				t.Errorf("socket %q; want %q", got, tc.want)
			}
		})
	}
}

func TestFail2banStopped(t *testing.T) {
	running := fstest.MapFS{"var/run/fail2ban/fail2ban.sock": &fstest.MapFile{Mode: fs.ModeSocket | 0o600}}
	if err := Fail2banStopped(running); err != nil {
		t.Errorf("with its socket: %v; want nil", err)
	}
	moved := fstest.MapFS{
		"etc/fail2ban/fail2ban.local":    &fstest.MapFile{Data: []byte("[Definition]\nsocket = /run/f2b.sock\n")},
		"var/run/fail2ban/fail2ban.sock": &fstest.MapFile{},
	}
	err := Fail2banStopped(moved)
	if !errors.Is(err, ErrFail2banStopped) || !strings.Contains(err.Error(), "/run/f2b.sock does not exist") {
		t.Errorf("with its socket moved and absent: %v; want ErrFail2banStopped naming /run/f2b.sock", err)
	}
	if err := Fail2banStopped(fstest.MapFS{}); !errors.Is(err, ErrFail2banStopped) || !strings.Contains(err.Error(), DefaultFail2banSocket) {
		t.Errorf("without a socket: %v; want ErrFail2banStopped naming %s", err, DefaultFail2banSocket)
	}
}

func FuzzFail2banSocket(f *testing.F) {
	f.Add([]byte("[Definition]\nsocket = /run/x.sock\n"))
	f.Add([]byte("[Definition\nsocket: /y\n[]\n=\n:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Fail2banSocket(fstest.MapFS{"c/fail2ban.conf": &fstest.MapFile{Data: b}}, "c")
		if !strings.HasPrefix(got, "/") || len(got) >= 4096 || strings.ContainsAny(got, "%\x00") {
			t.Fatalf("socket %q from %q", got, b)
		}
	})
}
