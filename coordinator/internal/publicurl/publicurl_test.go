package publicurl

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		raw                      string
		want, host, port, listen string
		ip                       bool
	}{
		{raw: "https://coord.example.com", want: "https://coord.example.com", host: "coord.example.com", port: "443", listen: ":443"},
		{raw: "https://coord.example.com/", want: "https://coord.example.com", host: "coord.example.com", port: "443", listen: ":443"},
		{raw: "https://Coord.Example.COM.:443", want: "https://coord.example.com", host: "coord.example.com", port: "443", listen: ":443"},
		{raw: "https://coord.example.com:8443", want: "https://coord.example.com:8443", host: "coord.example.com", port: "8443", listen: ":8443"},
		{raw: "https://coord.example.com:08443", want: "https://coord.example.com:8443", host: "coord.example.com", port: "8443", listen: ":8443"},
		{raw: "https://203.0.113.7:4443", want: "https://203.0.113.7:4443", host: "203.0.113.7", port: "4443", listen: ":4443", ip: true},
		{raw: "https://[2001:db8::1]", want: "https://[2001:db8::1]", host: "2001:db8::1", port: "443", listen: ":443", ip: true},
	} {
		u, err := Parse(tt.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.raw, err)
			continue
		}
		if u.String() != tt.want || u.Host() != tt.host || u.Port() != tt.port || u.ListenAddr() != tt.listen || u.IsIP() != tt.ip || u.Origin() != tt.want {
			t.Errorf("Parse(%q) = %s host %s port %s listen %s ip %v; want %s host %s port %s listen %s ip %v",
				tt.raw, u, u.Host(), u.Port(), u.ListenAddr(), u.IsIP(), tt.want, tt.host, tt.port, tt.listen, tt.ip)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"http://coord.example.com":          "serves HTTPS only; give https://coord.example.com",
		"coord.example.com":                 "serves HTTPS only",
		"https://":                          "has no host",
		"https://coord.example.com/mcp":     "no path, query or fragment",
		"https://coord.example.com/?a=b":    "no path, query or fragment",
		"https://coord.example.com?":        "no path, query or fragment",
		"https://coord.example.com/#app":    "no path, query or fragment",
		"https://u:p@coord.example.com":     "leave out the user name and password",
		"https://coord.example.com:0":       "is not a port number",
		"https://coord.example.com:70000":   "is not a port number",
		"https://coord.example.com:":        "the port is empty",
		"https://bücher.example":            "ASCII form",
		"https://coord.example.com:https":   "not a URL",
		"https://coord example.com":         "not a URL",
		"https://%zz":                       "not a URL",
		"https://coord.example.com/ignored": "no path",
	} {
		_, err := Parse(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): got %v; want an error saying %q", raw, err, want)
		}
	}
}

func TestAccepts(t *testing.T) {
	def, _ := Parse("https://coord.example.com")
	port, _ := Parse("https://coord.example.com:8443")
	v6, _ := Parse("https://[2001:db8::1]")
	for _, tt := range []struct {
		u    URL
		host string
		want bool
	}{
		{def, "coord.example.com", true},
		{def, "COORD.example.com", true},
		{def, "coord.example.com.", true},
		{def, "coord.example.com:443", true},
		{def, "coord.example.com:8443", false},
		{def, "evil.example", false},
		{def, "coord.example.com.evil.example", false},
		{def, "127.0.0.1", false},
		{def, "localhost:443", false},
		{def, "", false},
		{port, "coord.example.com:8443", true},
		{port, "coord.example.com", false},
		{port, "coord.example.com:443", false},
		{v6, "[2001:db8::1]", true},
		{v6, "[2001:db8::1]:443", true},
		{v6, "[2001:db8::2]", false},
		{URL{}, "", false},
	} {
		if got := tt.u.Accepts(tt.host); got != tt.want {
			t.Errorf("%s accepts Host %q = %v; want %v", tt.u, tt.host, got, tt.want)
		}
	}
}

func TestZero(t *testing.T) {
	var u URL
	if !u.IsZero() || u.String() != "" {
		t.Errorf("zero URL: IsZero %v, String %q; want true, \"\"", u.IsZero(), u.String())
	}
}

// A URL that parses prints as one that parses to the same URL, and accepts
// the Host a client sends for it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"https://coord.example.com", "https://coord.example.com:8443/", "https://[::1]:1", "http://x", "https://a.b:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := Parse(raw)
		if err != nil {
			return
		}
		again, err := Parse(u.String())
		if err != nil || again != u {
			t.Fatalf("Parse(%q) = %s, which parses to %v, %v", raw, u, again, err)
		}
		if !u.Accepts(strings.TrimPrefix(u.String(), "https://")) {
			t.Fatalf("%s does not accept its own Host", u)
		}
	})
}
