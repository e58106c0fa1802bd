package defense

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// sshdText renders the settings for comparing with a want written out.
func sshdText(c *gridcityv1.SSHConfig) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("password_authentication %s from %s\npermit_root_login %s from %s\nkbd_interactive_authentication %s from %s\nuse_pam %s\nhas_match_blocks %v\nfiles %s\n",
		c.GetPasswordAuthentication(), c.GetPasswordAuthenticationFrom(),
		c.GetPermitRootLogin(), c.GetPermitRootLoginFrom(),
		c.GetKbdInteractiveAuthentication(), c.GetKbdInteractiveAuthenticationFrom(),
		c.GetUsePam(), c.GetHasMatchBlocks(), strings.Join(c.GetFiles(), " "))
}

type sshdCase struct {
	name string
	// files by absolute path; the main file is /etc/ssh/sshd_config.
	files    map[string]string
	want     string
	problems string // one a line
	// relative is set where an Include is relative, which the comparison
	// with the real sshd cannot move out of /etc/ssh.
	relative bool
}

func sshdCases(t testing.TB) []sshdCase {
	debian := string(mustRead(t, "testdata/sshd/debian12-sshd_config"))
	return []sshdCase{
		{
			name:  "debian 12 as shipped",
			files: map[string]string{"/etc/ssh/sshd_config": debian},
			want: `password_authentication yes from default
permit_root_login prohibit-password from default
kbd_interactive_authentication no from /etc/ssh/sshd_config:62
use_pam yes
has_match_blocks false
files /etc/ssh/sshd_config
`,
		},
		{
			// Ubuntu's cloud images: cloud-init's drop-in is read at line
			// 12, so it wins over an admin's line at the end of the file.
			name: "cloud-init's drop-in wins over the main file",
			files: map[string]string{
				"/etc/ssh/sshd_config":                      debian + "PasswordAuthentication no\nPermitRootLogin no\n",
				"/etc/ssh/sshd_config.d/50-cloud-init.conf": "PasswordAuthentication yes\n",
			},
			want: `password_authentication yes from /etc/ssh/sshd_config.d/50-cloud-init.conf:1
permit_root_login no from /etc/ssh/sshd_config:124
kbd_interactive_authentication no from /etc/ssh/sshd_config:62
use_pam yes
has_match_blocks false
files /etc/ssh/sshd_config /etc/ssh/sshd_config.d/50-cloud-init.conf
`,
		},
		{
			// Drop-ins are read in glob order; glob skips dot files and
			// names the pattern does not match.
			name: "drop-ins in lexical order",
			files: map[string]string{
				"/etc/ssh/sshd_config":                      debian,
				"/etc/ssh/sshd_config.d/10-hardening.conf":  "# ours\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n",
				"/etc/ssh/sshd_config.d/50-cloud-init.conf": "PasswordAuthentication yes\n",
				"/etc/ssh/sshd_config.d/.00-old.conf":       "PasswordAuthentication yes\n",
				"/etc/ssh/sshd_config.d/00-notes.txt":       "PermitRootLogin yes\n",
			},
			want: `password_authentication no from /etc/ssh/sshd_config.d/10-hardening.conf:2
permit_root_login prohibit-password from default
kbd_interactive_authentication no from /etc/ssh/sshd_config.d/10-hardening.conf:3
use_pam yes
has_match_blocks false
files /etc/ssh/sshd_config /etc/ssh/sshd_config.d/10-hardening.conf /etc/ssh/sshd_config.d/50-cloud-init.conf
`,
		},
		{
			// RHEL 9: the Include comes first; 50-redhat.conf sets
			// ChallengeResponseAuthentication (the old name of
			// KbdInteractiveAuthentication) and UsePAM, and includes the
			// crypto policy; the installer writes 01-permitrootlogin.conf
			// when root may log in with a password.
			name: "rhel 9 layout",
			files: map[string]string{
				"/etc/ssh/sshd_config":                                "# RHEL 9 keeps its settings in drop-ins\nInclude /etc/ssh/sshd_config.d/*.conf\n#PermitRootLogin prohibit-password\nPasswordAuthentication yes\nAuthorizedKeysFile .ssh/authorized_keys\nSubsystem sftp /usr/libexec/openssh/sftp-server\n",
				"/etc/ssh/sshd_config.d/01-permitrootlogin.conf":      "# written by the installer\nPermitRootLogin yes\n",
				"/etc/ssh/sshd_config.d/50-redhat.conf":               "Include /etc/crypto-policies/back-ends/opensshserver.config\nSyslogFacility AUTHPRIV\nChallengeResponseAuthentication no\nGSSAPIAuthentication yes\nGSSAPICleanupCredentials no\nUsePAM yes\nX11Forwarding yes\nPrintMotd no\n",
				"/etc/crypto-policies/back-ends/opensshserver.config": "Ciphers aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-ctr,aes128-gcm@openssh.com,aes128-ctr\n",
			},
			want: `password_authentication yes from /etc/ssh/sshd_config:4
permit_root_login yes from /etc/ssh/sshd_config.d/01-permitrootlogin.conf:2
kbd_interactive_authentication no from /etc/ssh/sshd_config.d/50-redhat.conf:3
use_pam yes
has_match_blocks false
files /etc/ssh/sshd_config /etc/ssh/sshd_config.d/01-permitrootlogin.conf /etc/ssh/sshd_config.d/50-redhat.conf /etc/crypto-policies/back-ends/opensshserver.config
`,
		},
		{
			// Settings in a Match block apply to some connections only;
			// "Match all" returns to the global scope.
			name: "match blocks",
			files: map[string]string{
				"/etc/ssh/sshd_config": "PasswordAuthentication no\nMatch Address 10.0.0.0/8,192.168.0.0/16\n\tPasswordAuthentication yes\n\tPermitRootLogin yes\n  KbdInteractiveAuthentication yes\nMatch all # back\nPermitRootLogin no\nMatch User backup Host *.example.com\n\tPermitRootLogin forced-commands-only\n",
			},
			want: `password_authentication no from /etc/ssh/sshd_config:1
permit_root_login no from /etc/ssh/sshd_config:7
kbd_interactive_authentication yes from default
use_pam no
has_match_blocks true
files /etc/ssh/sshd_config
`,
		},
		{
			// A Match block ends with the file it is in: the main file's
			// later line is global again.
			name: "match block in a drop-in",
			files: map[string]string{
				"/etc/ssh/sshd_config":                  "Include sshd_config.d/*.conf\nPasswordAuthentication no\n",
				"/etc/ssh/sshd_config.d/10-backup.conf": "Match User backup\n  PasswordAuthentication yes\n",
			},
			relative: true,
			want: `password_authentication no from /etc/ssh/sshd_config:2
permit_root_login prohibit-password from default
kbd_interactive_authentication yes from default
use_pam no
has_match_blocks true
files /etc/ssh/sshd_config /etc/ssh/sshd_config.d/10-backup.conf
`,
		},
		{
			// sshd reads a file included from within a Match block for
			// syntax only: not even its "Match all" makes it global.
			name: "include inside a match block",
			files: map[string]string{
				"/etc/ssh/sshd_config": "Match User admin\nInclude /etc/ssh/extra.conf\nMatch all\nKbdInteractiveAuthentication no\n",
				"/etc/ssh/extra.conf":  "Match all\nPasswordAuthentication no\nPermitRootLogin no\n",
			},
			want: `password_authentication yes from default
permit_root_login prohibit-password from default
kbd_interactive_authentication no from /etc/ssh/sshd_config:4
use_pam no
has_match_blocks true
files /etc/ssh/sshd_config /etc/ssh/extra.conf
`,
		},
		{
			// Keyword=value, any case, quotes, comments after values,
			// blanks and CRLF line ends, the old names.
			name: "syntax",
			files: map[string]string{
				"/etc/ssh/sshd_config": "  passwordauthentication=No\r\n\tPERMITROOTLOGIN = without-password # the old name\r\n\"KbdInteractiveAuthentication\" \"no\"\nUsePAM\tYES\nPasswordAuthentication yes\n#PermitRootLogin yes\n",
			},
			want: `password_authentication no from /etc/ssh/sshd_config:1
permit_root_login prohibit-password from /etc/ssh/sshd_config:2
kbd_interactive_authentication no from /etc/ssh/sshd_config:3
use_pam yes
has_match_blocks false
files /etc/ssh/sshd_config
`,
		},
		{
			// Lines sshd refuses are reported and passed over.
			name: "lines sshd refuses",
			files: map[string]string{
				"/etc/ssh/sshd_config": "PasswordAuthentication maybe\nPermitRootLogin\nUsePAM yes no\nPermitRootLogin \"yes\nMatch Group wheel\nUsePAM yes\nMatch all extra\nMatch\nPasswordAuthentication no\nInclude /etc/ssh/missing.conf /etc/ssh/d/*.conf\n",
				"/etc/ssh/d/fifo.conf": "\x00fifo",
			},
			want: `password_authentication yes from default
permit_root_login prohibit-password from default
kbd_interactive_authentication yes from default
use_pam no
has_match_blocks true
files /etc/ssh/sshd_config
`,
			problems: `/etc/ssh/sshd_config:1: PasswordAuthentication: unsupported value "maybe"; sshd refuses this line
/etc/ssh/sshd_config:2: no argument after PermitRootLogin
/etc/ssh/sshd_config:3: UsePAM takes one argument; sshd refuses this line
/etc/ssh/sshd_config:4: unbalanced quotes
/etc/ssh/sshd_config:6: UsePAM is not allowed within a Match block; sshd refuses this line
/etc/ssh/sshd_config:7: 'all' cannot be combined with other Match criteria; sshd refuses this line
/etc/ssh/sshd_config:8: no argument after Match
/etc/ssh/sshd_config:10: cannot read /etc/ssh/d/fifo.conf: not a regular file; sshd refuses to start without it
`,
		},
		{
			name: "an include loop stops at sshd's depth",
			files: map[string]string{
				"/etc/ssh/sshd_config": "Include /etc/ssh/sshd_config\nPermitRootLogin no\n",
			},
			want: `password_authentication yes from default
permit_root_login no from /etc/ssh/sshd_config:2
kbd_interactive_authentication yes from default
use_pam no
has_match_blocks false
files /etc/ssh/sshd_config
`,
			problems: "/etc/ssh/sshd_config:1: Include nested deeper than 16 levels; sshd refuses this config\n",
		},
	}
}

// mapFS builds the files of a case; a content starting with NUL makes a
// FIFO, which must not be opened.
func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, content := range files {
		f := &fstest.MapFile{Data: []byte(content), Mode: 0o644}
		if strings.HasPrefix(content, "\x00") {
			f = &fstest.MapFile{Mode: fs.ModeNamedPipe | 0o644}
		}
		m[strings.TrimPrefix(name, "/")] = f
	}
	return m
}

func TestReadSSHD(t *testing.T) {
	for _, tt := range sshdCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			c, problems, err := ReadSSHD(mapFS(tt.files), "/etc/ssh/sshd_config")
			if err != nil {
				t.Fatal(err)
			}
			if got := sshdText(c); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			var p strings.Builder
			for _, x := range problems {
				p.WriteString(x + "\n")
			}
			if p.String() != tt.problems {
				t.Errorf("got problems\n%s\nwant\n%s", p.String(), tt.problems)
			}
		})
	}
}

// deniedFS refuses everything, as a file only root may read does.
type deniedFS struct{}

func (deniedFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

func TestReadSSHDErrors(t *testing.T) {
	tests := []struct {
		name string
		fsys fs.FS
		want string
	}{
		{"no sshd", fstest.MapFS{}, "/etc/ssh/sshd_config not found: is the OpenSSH server installed?"},
		{"not readable", deniedFS{}, "permission denied reading /etc/ssh/sshd_config"},
		{"a directory", fstest.MapFS{"etc/ssh/sshd_config/x": {}}, "read /etc/ssh/sshd_config: is a directory"},
	}
	for _, tt := range tests {
		c, _, err := ReadSSHD(tt.fsys, "/etc/ssh/sshd_config")
		if c != nil || err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, %v; want the error %q", tt.name, c, err, tt.want)
		}
	}
}

func TestReadSSHDBounds(t *testing.T) {
	files := fstest.MapFS{"etc/ssh/sshd_config": {Data: []byte("Include /etc/ssh/d/*.conf\nPermitRootLogin no\n")}}
	for i := range maxConfigFiles + 10 {
		files[fmt.Sprintf("etc/ssh/d/%03d.conf", i)] = &fstest.MapFile{Data: []byte("X11Forwarding no\n")}
	}
	big := strings.Repeat("# padding\n", maxConfigSize/10) + "PasswordAuthentication no\n"
	files["etc/ssh/d/000.conf"] = &fstest.MapFile{Data: []byte("PasswordAuthentication yes\n" + big)}
	files["etc/ssh/d/001.conf"] = &fstest.MapFile{Data: []byte(strings.Repeat("x", maxConfigLine+1) + "\nKbdInteractiveAuthentication no\n")}
	c, problems, err := ReadSSHD(files, "/etc/ssh/sshd_config")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/etc/ssh/sshd_config:1: Include matches more than 256 files; the rest were not read",
		"/etc/ssh/d/000.conf is larger than 1 MiB; only its start was read",
		"/etc/ssh/d/001.conf:1: line longer than 16 KiB not read",
		"/etc/ssh/sshd_config:1: more than 256 config files; the rest were not read",
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("got problems\n%s\nwant\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if len(c.GetFiles()) != maxConfigFiles || c.GetPasswordAuthentication() != "yes" || c.GetKbdInteractiveAuthenticationFrom() != "/etc/ssh/d/001.conf:2" || c.GetPermitRootLoginFrom() != "/etc/ssh/sshd_config:2" {
		t.Errorf("got %d files and\n%s", len(c.GetFiles()), sshdText(c))
	}
}

func TestSSHArgs(t *testing.T) {
	tests := []struct {
		in   string
		want string // args joined by |
		ok   bool
	}{
		{"no", "no", true},
		{"no # comment", "no", true},
		{"no#not-a-comment", "no#not-a-comment", true},
		{`"yes"`, "yes", true},
		{`'a b' "c d"`, "a b|c d", true},
		{`a\ b \"c\" \\d \x`, `a b|"c"|\d|\x`, true},
		{`"unterminated`, "", false},
		{"\t  spaced\targs  ", "spaced|args", true},
		{"# all comment", "", true},
	}
	for _, tt := range tests {
		args, ok := sshArgs(tt.in)
		if got := strings.Join(args, "|"); got != tt.want || ok != tt.ok {
			t.Errorf("sshArgs(%q): got %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSSHKeyword(t *testing.T) {
	tests := []struct{ in, kw, rest string }{
		{"PasswordAuthentication no", "PasswordAuthentication", "no"},
		{"PasswordAuthentication=no", "PasswordAuthentication", "no"},
		{"PasswordAuthentication = no", "PasswordAuthentication", "no"},
		{"PasswordAuthentication\t=\tno", "PasswordAuthentication", "no"},
		{"PasswordAuthentication==no", "PasswordAuthentication", "=no"},
		{`"PasswordAuthentication" no`, "PasswordAuthentication", "no"},
		{"Match", "Match", ""},
	}
	for _, tt := range tests {
		kw, rest, _ := sshKeyword(tt.in)
		if kw != tt.kw || rest != tt.rest {
			t.Errorf("sshKeyword(%q): got %q, %q; want %q, %q", tt.in, kw, rest, tt.kw, tt.rest)
		}
	}
}

func FuzzReadSSHD(f *testing.F) {
	f.Add([]byte(mustRead(f, "testdata/sshd/debian12-sshd_config")))
	f.Add([]byte("Include /etc/ssh/sshd_config.d/*.conf\nMatch User x\nInclude d/*\nMatch all\nPasswordAuthentication=no\n"))
	f.Add([]byte("\"PermitRootLogin\" 'without-password' #\nKbdInteractiveAuthentication \"\\\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same text as the main file and a drop-in that includes
		// itself, so Include and Match nest as deep as the input says.
		files := fstest.MapFS{
			"etc/ssh/sshd_config":          {Data: data},
			"etc/ssh/sshd_config.d/a.conf": {Data: data},
			"etc/ssh/d/b":                  {Data: append([]byte("Include /etc/ssh/sshd_config.d/a.conf\n"), data...)},
		}
		c, problems, err := ReadSSHD(files, "/etc/ssh/sshd_config")
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > maxProblems+1 || len(c.GetFiles()) > maxConfigFiles {
			t.Fatalf("%d problems, %d files", len(problems), len(c.GetFiles()))
		}
		for kw, v := range map[string]string{kwPassword: c.GetPasswordAuthentication(), kwRoot: c.GetPermitRootLogin(), kwKbd: c.GetKbdInteractiveAuthentication(), kwPAM: c.GetUsePam()} {
			if sshdValues[kw][v] != v {
				t.Fatalf("%s = %q", kw, v)
			}
		}
		for _, from := range []string{c.GetPasswordAuthenticationFrom(), c.GetPermitRootLoginFrom(), c.GetKbdInteractiveAuthenticationFrom()} {
			if from != "default" && !strings.HasPrefix(from, "/etc/ssh/") {
				t.Fatalf("from %q", from)
			}
		}
	})
}

func TestReadSSHDIncludeFanOut(t *testing.T) {
	// Each level includes the next twice: 2^12 reads unless bounded.
	files := fstest.MapFS{"etc/ssh/sshd_config": {Data: []byte("Include /etc/ssh/l1\nPermitRootLogin no\n")}}
	for i := 1; i <= 12; i++ {
		next := fmt.Sprintf("/etc/ssh/l%d", i+1)
		files[fmt.Sprintf("etc/ssh/l%d", i)] = &fstest.MapFile{Data: []byte("Include " + next + " " + next + "\n" + strings.Repeat("# padding\n", 100))}
	}
	c, problems, err := ReadSSHD(files, "/etc/ssh/sshd_config")
	if err != nil || c.GetPermitRootLogin() != "no" || len(problems) != 1 || !strings.Contains(problems[0], "the rest was not read") {
		t.Errorf("got %v, problems %q, error %v; want PermitRootLogin no and one problem", c.GetPermitRootLogin(), problems, err)
	}
}
