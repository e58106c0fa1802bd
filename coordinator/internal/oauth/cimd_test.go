package oauth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// documentServer serves Client ID Metadata Documents over https on
// loopback: doc(url) is the document at url.
func documentServer(t *testing.T, doc func(id string) any) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	var ts *httptest.Server
	ts = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect.json":
			http.Redirect(w, r, "/client.json", http.StatusFound)
		case "/big.json":
			w.Write([]byte(`{"client_name":"` + strings.Repeat("x", 6<<10) + `"}`))
		default:
			json.NewEncoder(w).Encode(doc(ts.URL + r.URL.Path))
		}
	}))
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return ts, pool
}

func TestCIMD(t *testing.T) {
	ts, pool := documentServer(t, func(id string) any {
		return map[string]any{"client_id": id, "client_name": "Doc client", "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"}}
	})
	f := newFixture(t, func(c *Config) { c.CIMD.AllowPrivate, c.CIMD.RootCAs = true, pool })
	id := ts.URL + "/client.json"
	code := f.code(t, id, store.ScopeRead)
	res, m := f.exchange(t, id, code)
	if res.StatusCode != 200 {
		t.Fatalf("exchange: %d %v", res.StatusCode, m)
	}
	g, err := f.s.Verify(context.Background(), m["access_token"].(string), f.clock.now())
	if err != nil || g.Name != "Doc client" || g.Client != id {
		t.Fatalf("verify: %+v, %v", g, err)
	}
	c, err := f.st.OAuthClient(context.Background(), id)
	if err != nil || c.Registration != store.RegisteredCIMD {
		t.Errorf("stored client: %+v, %v", c, err)
	}

	for _, tt := range []struct{ name, id string }{
		{"redirect", ts.URL + "/redirect.json"},
		{"too big", ts.URL + "/big.json"},
		{"root path", ts.URL + "/"},
		{"dot segment", ts.URL + "/a/../client.json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.s.cimd.fetch(context.Background(), tt.id, f.clock.now()); err == nil {
				t.Errorf("fetch %s: got no error", tt.id)
			}
		})
	}

	t.Run("loopback refused by default", func(t *testing.T) {
		fe := newCIMDFetcher(CIMDConfig{RootCAs: pool})
		if _, err := fe.fetch(context.Background(), id, time.Now()); !errors.Is(err, errPrivate) {
			t.Errorf("got %v; want the loopback address refused", err)
		}
		// Named by a name that resolves to loopback: refused the same.
		byName := strings.Replace(id, "127.0.0.1", "localhost", 1)
		if _, err := fe.fetch(context.Background(), byName, time.Now()); !errors.Is(err, errPrivate) {
			t.Errorf("got %v; want the loopback address refused", err)
		}
	})

	t.Run("document naming another id", func(t *testing.T) {
		ts2, pool2 := documentServer(t, func(string) any {
			return map[string]any{"client_id": "https://someone.else/client.json", "client_name": "x", "redirect_uris": []string{redirect}}
		})
		fe := newCIMDFetcher(CIMDConfig{AllowPrivate: true, RootCAs: pool2})
		if _, err := fe.fetch(context.Background(), ts2.URL+"/client.json", time.Now()); err == nil {
			t.Error("got no error")
		}
	})
}

func TestPublicAddr(t *testing.T) {
	for a, want := range map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true, "127.0.0.1": false, "10.1.2.3": false, "192.168.1.1": false, "172.16.0.1": false,
		"169.254.169.254": false, "::1": false, "fe80::1": false, "fd00::1": false, "100.64.0.1": false, "0.0.0.0": false, "::ffff:127.0.0.1": false,
		"224.0.0.1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(a)); got != want {
			t.Errorf("publicAddr(%s) = %v; want %v", a, got, want)
		}
	}
}

func FuzzParseCIMD(f *testing.F) {
	const id = "https://app.example/client.json"
	f.Add([]byte(`{"client_id":"https://app.example/client.json","client_name":"A","redirect_uris":["https://app.example/cb"]}`))
	f.Add([]byte(`{"client_id":"https://app.example/client.json","client_name":"\u0000","redirect_uris":["http://localhost/cb"],"token_endpoint_auth_method":"none"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseCIMD(id, body)
		if err != nil {
			return
		}
		if c.ID != id || c.Name == "" || len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > maxRedirectURIs {
			t.Fatalf("accepted %+v", c)
		}
		for _, u := range c.RedirectURIs {
			if checkRedirectURI(u) != nil {
				t.Fatalf("accepted redirect %q", u)
			}
		}
	})
}

func FuzzCheckRedirectURI(f *testing.F) {
	for _, s := range []string{redirect, "https://a.example/cb", "http://evil.example/cb", "https://a/cb#f", "http://[::1]:80/x", "http://127.0.0.1.evil.example/", "javascript:alert(1)", "https://u:p@a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if checkRedirectURI(raw) != nil {
			return
		}
		u, err := http.NewRequest("GET", raw, nil)
		if err != nil {
			t.Fatalf("accepted %q, which is no URL: %v", raw, err)
		}
		switch {
		case strings.Contains(raw, "#") || u.URL.User != nil:
			t.Fatalf("accepted %q with a fragment or credentials", raw)
		case u.URL.Scheme == "http" && !loopbackHost(u.URL.Hostname()):
			t.Fatalf("accepted plain http off loopback: %q", raw)
		case u.URL.Scheme != "http" && u.URL.Scheme != "https":
			t.Fatalf("accepted scheme %q", u.URL.Scheme)
		}
	})
}

func FuzzPKCE(f *testing.F) {
	f.Add(verifier, challenge(verifier))
	f.Add("", "")
	f.Fuzz(func(t *testing.T, v, c string) {
		if pkceMatches(v, c) && c != challenge(v) {
			t.Fatalf("verifier %q matched challenge %q", v, c)
		}
	})
}
