package collect

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseApt(t *testing.T) {
	tests := []struct {
		name              string
		in                string
		pending, security uint32
		securityPkgs      string
	}{
		{
			name: "debian 12, real output", in: mustRead(t, "testdata/updates/apt-debian12.txt"),
			pending: 80, security: 20,
			securityPkgs: "libcups2 libgdk-pixbuf-2.0-0 libgdk-pixbuf2.0-bin libgdk-pixbuf2.0-common libgnutls-dane0 libgnutls-openssl27 libgnutls28-dev libgnutls30 libgnutlsxx30 liblcms2-2 libnghttp2-14 libpng-dev libpng-tools libpng16-16 libtiff6 openjdk-17-jdk openjdk-17-jdk-headless openjdk-17-jre openjdk-17-jre-headless python3-jwt",
		},
		{
			// New kernel packages are installs, not upgrades, as apt's own
			// "7 upgraded, 7 newly installed" counts them.
			name: "ubuntu 22.04, real output", in: mustRead(t, "testdata/updates/apt-ubuntu2204.txt"),
			pending: 7, security: 5,
			securityPkgs: "libcurl4 linux-cloud-tools-virtual linux-generic linux-headers-generic linux-image-generic",
		},
		{
			name:    "debian 10: the security label without a -security suite",
			in:      "Inst libc6 [2.28-10] (2.28-10+deb10u1 Debian-Security:10/oldstable [amd64])\n",
			pending: 1, security: 1, securityPkgs: "libc6",
		},
		{
			name:    "a package named security is not a security update",
			in:      "Inst libsecurity-dev [1.0] (1.1 Ubuntu:22.04/jammy-updates [amd64])\nInst python3-security [1] (2 Debian:12/stable [all])\n",
			pending: 2,
		},
		{
			name:    "foreign architecture counted once per name",
			in:      "Inst libc6:i386 [2.36-9] (2.36-9+deb12u1 Debian-Security:12/stable-security [i386])\nInst libc6:i386 [2.36-9] (2.36-9+deb12u1 Debian-Security:12/stable-security [i386])\n",
			pending: 1, security: 1, securityPkgs: "libc6:i386",
		},
		{name: "nothing to do", in: "Reading package lists...\n0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n"},
	}
	for _, tt := range tests {
		got := parseApt(linesOf([]byte(tt.in), maxUpdatesLines))
		if got.pending != tt.pending || got.security != tt.security || strings.Join(got.securityPkgs, " ") != tt.securityPkgs {
			t.Errorf("%s: got %d pending, %d security %q; want %d, %d %q", tt.name, got.pending, got.security, got.securityPkgs, tt.pending, tt.security, tt.securityPkgs)
		}
	}
}

func TestParseAptBound(t *testing.T) {
	var b strings.Builder
	for i := range maxSecurityPackages + 20 {
		fmt.Fprintf(&b, "Inst p%04d [1] (2 Debian-Security:12/stable-security [amd64])\n", i)
	}
	got := parseApt(linesOf([]byte(b.String()), maxUpdatesLines))
	if got.security != maxSecurityPackages+20 || len(got.securityPkgs) != maxSecurityPackages {
		t.Errorf("got %d security, %d names; want %d and %d", got.security, len(got.securityPkgs), maxSecurityPackages+20, maxSecurityPackages)
	}
}

func FuzzParseApt(f *testing.F) {
	f.Add([]byte("Inst libssl3 [3.0.11-1~deb12u1] (3.0.11-1~deb12u2 Debian-Security:12/stable-security [amd64])\n"))
	f.Add([]byte("Inst libcurl4 [7.81.0-1ubuntu1.17] (7.81.0-1ubuntu1.18 Ubuntu:22.04/jammy-updates, Ubuntu:22.04/jammy-security [amd64])\nInst x [ ((\n"))
	f.Add([]byte("Inst a [1] )(\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := parseApt(linesOf(data, maxUpdatesLines))
		checkPkgCounts(t, got)
	})
}

func checkPkgCounts(t *testing.T, c pkgCounts) {
	t.Helper()
	if c.security > c.pending && c.pending != 0 || len(c.securityPkgs) > maxSecurityPackages || uint32(len(c.securityPkgs)) > c.security {
		t.Fatalf("inconsistent counts %+v", c)
	}
	for _, n := range c.securityPkgs {
		if n == "" || len(n) > maxName || !fitText(n) {
			t.Fatalf("package name %q empty, too long or not clean", n)
		}
	}
}

func TestParseDnfCheckUpdate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint32
	}{
		{"el9 with a wrapped name and obsoletes", mustRead(t, "testdata/updates/dnf-check-update.txt"), 7},
		{"dnf5 preamble", "Updating and loading repositories:\nRepositories loaded.\nkernel.x86_64   6.11.5-300.fc41   updates\n", 1},
		{"metadata line ignored", "Last metadata expiration check: 0:10:00 ago on Mon.\n\nlynis.noarch 3.0.9-1.fc40 updates\n", 1},
		{"nothing", "", 0},
	}
	for _, tt := range tests {
		if got := parseDnfCheckUpdate(linesOf([]byte(tt.in), maxUpdatesLines)); got != tt.want {
			t.Errorf("%s: got %d; want %d", tt.name, got, tt.want)
		}
	}
}

func TestParseDnfSecurity(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		count uint32
		names string
	}{
		{"dnf 4 (el9)", mustRead(t, "testdata/updates/dnf-updateinfo-security.txt"), 4, "kernel kernel-core openssl openssl-libs"},
		{"dnf 5 with issued dates", mustRead(t, "testdata/updates/dnf5-updateinfo-security.txt"), 3, "curl libcurl python3-idna"},
		{"yum (el7)", "RHSA-2025:1234 Important/Sec. kernel-3.10.0-1160.88.1.el7.x86_64\n", 1, "kernel"},
		{"nothing", "", 0, ""},
	}
	for _, tt := range tests {
		count, names := parseDnfSecurity(linesOf([]byte(tt.in), maxUpdatesLines))
		if count != tt.count || strings.Join(names, " ") != tt.names {
			t.Errorf("%s: got %d %q; want %d %q", tt.name, count, names, tt.count, tt.names)
		}
	}
}

func TestNevraName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"openssl-libs-1:3.0.7-27.el9.x86_64", "openssl-libs"},
		{"python3-idna-3.7-1.fc40.noarch", "python3-idna"},
		{"kernel-5.14.0-427.16.1.el9_4.x86_64", "kernel"},
		{"Important/Sec.", ""},
		{"2024-04-24", ""},
		{"FEDORA-2024-1bd7ae3bd6", ""},
		{"name-only.x86_64", ""},
		{"-1-1.x86_64", ""},
	}
	for _, tt := range tests {
		got, _ := nevraName([]byte(tt.in))
		if string(got) != tt.want {
			t.Errorf("nevraName(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseDnf(f *testing.F) {
	f.Add([]byte("kernel.x86_64  5.14.0-427.el9  baseos\nlong.noarch\n  1.0-1 repo\nObsoleting Packages\n"), []byte("RHSA-1 Important/Sec. openssl-1:3.0.7-25.el9.x86_64\n"))
	f.Add([]byte("a.b\n1 2\n"), []byte("x y -.a z-1-1.a 2024-01-01 00:00:00\n"))
	f.Fuzz(func(t *testing.T, check, sec []byte) {
		pending := parseDnfCheckUpdate(linesOf(check, maxUpdatesLines))
		if pending > maxUpdatesLines {
			t.Fatalf("got %d pending from at most %d lines", pending, maxUpdatesLines)
		}
		count, names := parseDnfSecurity(linesOf(sec, maxUpdatesLines))
		checkPkgCounts(t, pkgCounts{security: count, securityPkgs: names})
	})
}
