// Package publicurl is the coordinator's public address, --public-url
// https://HOST[:PORT]: which URLs it takes, where its listener listens
// unless told otherwise, and which Host headers name it.
//
// The public listener serves what the loopback one serves (/mcp, the app,
// /healthz, /metrics), over TLS, to clients elsewhere: an AI client on a
// laptop or in a vendor's cloud, an approver on a phone. The rules its
// requests pass are the front door's (internal/frontdoor).
package publicurl

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// URL is a checked public URL: https, a host, an optional port, nothing
// else. The zero URL is "no public URL".
type URL struct {
	host string // lower case, no trailing dot, IPv6 without brackets
	port string // "" for 443
}

// Parse checks raw as a public URL and returns it. The errors say what to
// give instead.
func Parse(raw string) (URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return URL{}, fmt.Errorf("--public-url %q is not a URL: give https://HOST or https://HOST:PORT, e.g. https://coord.example.com", raw)
	}
	if u.Scheme != "https" {
		return URL{}, fmt.Errorf("--public-url %q: the public listener serves HTTPS only; give https://%s (behind a TLS proxy of your own, use --public-http and --app-url instead)", raw, orHost(u.Host))
	}
	if u.User != nil {
		return URL{}, fmt.Errorf("--public-url %q: leave out the user name and password: give https://HOST[:PORT]", raw)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return URL{}, fmt.Errorf("--public-url %q: give the address alone, https://HOST[:PORT], with no path, query or fragment: gridcity serves /mcp and the app at the root of its own host", raw)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return URL{}, fmt.Errorf("--public-url %q has no host: give https://HOST[:PORT], e.g. https://coord.example.com", raw)
	}
	if strings.HasSuffix(u.Host, ":") {
		return URL{}, fmt.Errorf("--public-url %q: the port is empty; give https://HOST or https://HOST:PORT", raw)
	}
	if net.ParseIP(host) == nil {
		for _, r := range host {
			if r > 127 {
				return URL{}, fmt.Errorf("--public-url %q: give the host name in its ASCII form (xn--…), as DNS and certificates know it", raw)
			}
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
				return URL{}, fmt.Errorf("--public-url %q: %q is not a host name: give letters, digits, dots and dashes, e.g. coord.example.com", raw, host)
			}
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || strings.HasPrefix(host, ".") || strings.Contains(host, "..") {
		return URL{}, fmt.Errorf("--public-url %q: %q is not a host name, e.g. coord.example.com", raw, u.Hostname())
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return URL{}, fmt.Errorf("--public-url %q: port %q is not a port number (1-65535)", raw, port)
		}
		port = strconv.Itoa(n)
		if n == 443 {
			port = ""
		}
	}
	return URL{host: host, port: port}, nil
}

func orHost(h string) string {
	if h == "" {
		return "HOST"
	}
	return h
}

// IsZero reports whether u is "no public URL".
func (u URL) IsZero() bool { return u.host == "" }

// String is the URL, https://HOST[:PORT] with no trailing slash (and the
// port only when it is not 443), or "" for the zero URL.
func (u URL) String() string {
	if u.IsZero() {
		return ""
	}
	return "https://" + u.hostPort()
}

// Origin is the browser origin of pages served from u: the app's.
func (u URL) Origin() string { return u.String() }

// Host is the host name (or address) alone: what the certificate names.
func (u URL) Host() string { return u.host }

// IsIP reports whether the host is an IP address rather than a name.
func (u URL) IsIP() bool { return net.ParseIP(u.host) != nil }

// Port is the port clients connect to, "443" unless the URL says another.
func (u URL) Port() string {
	if u.port == "" {
		return "443"
	}
	return u.port
}

// ListenAddr is where the public listener listens unless told otherwise:
// the URL's port on every address of this host.
func (u URL) ListenAddr() string { return ":" + u.Port() }

func (u URL) hostPort() string {
	h := u.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if u.port == "" {
		return h
	}
	return h + ":" + u.port
}

// Accepts reports whether a request's Host header names u: the same host
// (in any case, with or without a trailing dot) and the same port, where
// no port means 443.
func (u URL) Accepts(hostHeader string) bool {
	if u.IsZero() {
		return false
	}
	host, port := hostHeader, ""
	if h, p, err := net.SplitHostPort(hostHeader); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(hostHeader, "[") && strings.HasSuffix(hostHeader, "]") {
		host = hostHeader[1 : len(hostHeader)-1]
	}
	if port == "" {
		port = "443"
	}
	return port == u.Port() && strings.EqualFold(strings.TrimSuffix(host, "."), u.host)
}
