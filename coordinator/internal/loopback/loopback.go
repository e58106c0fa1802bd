// Package loopback tells loopback addresses and names from others, for the
// checks that keep the coordinator's loopback-only HTTP endpoints (MCP and
// the app) from being reached by DNS rebinding.
package loopback

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// Addr reports whether host:port (or a bare host) is a loopback IP.
func Addr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Host reports whether a Host header (or a listen address) names loopback:
// localhost, a 127.0.0.0/8 address or [::1], with any port or none.
func Host(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Rebound reports a request that arrived on a loopback address with a Host
// naming something else: a page on evil.example whose name resolves to
// 127.0.0.1 calls the endpoint as its own origin, and only Host tells.
// A request marked HostChecked is never Rebound.
func Rebound(r *http.Request) bool {
	if checked, _ := r.Context().Value(hostCheckedKey{}).(bool); checked {
		return false
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return local != nil && Addr(local.String()) && !Host(r.Host)
}

type hostCheckedKey struct{}

// HostChecked marks a request's context as held to a stricter Host rule by
// the listener it arrived on: the public listener accepts its public host
// only (internal/frontdoor), which no rebinding page can send. That
// listener may still be bound to a loopback address (behind a port
// forward, or in tests), where the loopback rule would refuse the public
// host itself.
func HostChecked(ctx context.Context) context.Context {
	return context.WithValue(ctx, hostCheckedKey{}, true)
}
