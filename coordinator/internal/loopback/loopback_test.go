package loopback

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:4600": true, "127.0.0.1": true, "127.9.9.9:80": true, "[::1]:4600": true, "::1": true,
		"evil.example": false, "evil.example:4600": false, "10.0.0.1:4600": false, "": false, "localhost.evil.example": false, "[::ffff:10.0.0.1]:1": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v; want %v", host, got, want)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:4600": true, "[::1]:1": true, "10.0.0.1:4600": false, "localhost:1": false} {
		if got := Addr(addr); got != want {
			t.Errorf("Addr(%q) = %v; want %v", addr, got, want)
		}
	}
}

// A request the public listener has held to its own host is not rebound,
// whatever address it arrived on; any other still is.
func TestHostChecked(t *testing.T) {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8443}
	r := httptest.NewRequest("GET", "https://coord.test:8443/", nil)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
	if !Rebound(r) {
		t.Fatal("Host coord.test on a loopback listener: not rebound; want rebound")
	}
	if Rebound(r.WithContext(HostChecked(r.Context()))) {
		t.Error("the same request marked HostChecked: rebound; want not")
	}
}
