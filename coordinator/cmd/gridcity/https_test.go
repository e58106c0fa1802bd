package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/certtest"
	"github.com/gridcity/gridcity/coordinator/internal/publicurl"
)

// serve's flags for the public listener: what is accepted, what it means,
// and what is refused with what to give instead.
func TestServeFlagsPublic(t *testing.T) {
	cert, key := certtest.Write(t, "coord.example.com")
	for _, tt := range []struct {
		args  string
		want  string // an error containing this; "" for none
		https string // with no error: the public listener's address
		acme  bool
	}{
		{args: "", https: ":443"},
		{args: "--public-url https://coord.example.com", https: ":443", acme: true},
		{args: "--public-url https://coord.example.com:8443", https: ":8443", acme: true},
		{args: "--public-url https://coord.example.com --https 127.0.0.1:8443 --acme-directory https://acme.internal/directory --acme-email ops@example.com --acme-http :80", https: "127.0.0.1:8443", acme: true},
		{args: "--public-url https://coord.example.com --tls-cert " + cert + " --tls-key " + key, https: ":443"},
		{args: "--public-url https://203.0.113.7 --tls-cert " + cert + " --tls-key " + key, https: ":443"},
		{args: "--public-url https://coord.example.com --http 0.0.0.0:4600 --public-http", https: ":443", acme: true},

		{args: "--public-url http://coord.example.com", want: "serves HTTPS only"},
		{args: "--public-url https://coord.example.com/gridcity", want: "no path, query or fragment"},
		{args: "--public-url https://coord.example.com?x=1", want: "no path, query or fragment"},
		{args: "--public-url https://coord.example.com --acme-email ops@example.com --tls-cert " + cert + " --tls-key " + key, want: "--acme-email and --tls-cert conflict"},
		{args: "--public-url https://coord.example.com --acme-directory https://acme.internal/dir --tls-cert " + cert + " --tls-key " + key, want: "--acme-directory and --tls-cert conflict"},
		{args: "--public-url https://coord.example.com --acme-http :80 --tls-cert " + cert + " --tls-key " + key, want: "--acme-http and --tls-cert conflict"},
		{args: "--public-url https://coord.example.com --tls-cert " + cert, want: "--tls-cert and --tls-key go together"},
		{args: "--public-url https://203.0.113.7", want: "names an IP address"},
		{args: "--public-url https://coord", want: "needs a host name with a dot"},
		{args: "--public-url https://coord.example.com --acme-directory http://acme.internal/dir", want: "give the https URL of the CA's ACME directory"},
		{args: "--public-url https://coord.example.com --acme-email ops", want: "is not an email address"},
		{args: "--public-url https://coord.example.com --https 8443", want: "--https \"8443\" is not an address"},
		{args: "--public-url https://coord.example.com --acme-http 80", want: "--acme-http \"80\" is not an address"},
		{args: "--public-url https://coord.example.com --http 0.0.0.0:4600", want: "with --public-url it serves plain HTTP"},
		{args: "--public-url https://coord.example.com --http 0.0.0.0:4600 --tls-cert " + cert + " --tls-key " + key, want: "with --public-url it serves plain HTTP"},
		{args: "--https :8443", want: "--https is for the public listener: give --public-url"},
		{args: "--acme-directory https://acme.internal/dir", want: "--acme-directory is for the public listener"},
		{args: "--acme-email ops@example.com", want: "--acme-email is for the public listener"},
		{args: "--acme-http :80", want: "--acme-http is for the public listener"},
	} {
		o, err := serveFlags(strings.Fields(tt.args), io.Discard)
		switch {
		case tt.want != "":
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("serve %s: got %v; want an error saying %q", tt.args, err, tt.want)
			}
		case err != nil:
			t.Errorf("serve %s: %v", tt.args, err)
		case !o.public.IsZero() && (o.httpsAddr() != tt.https || o.acme() != tt.acme || o.httpTLS()):
			t.Errorf("serve %s: public listener on %s, ACME %v, --http TLS %v; want %s, %v, false", tt.args, o.httpsAddr(), o.acme(), o.httpTLS(), tt.https, tt.acme)
		}
	}
}

// The environment names the public URL as the flag does.
func TestPublicURLFromEnvironment(t *testing.T) {
	t.Setenv("GRIDCITY_PUBLIC_URL", "https://coord.example.com:8443")
	o, err := serveFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.public.String() != "https://coord.example.com:8443" || !o.acme() {
		t.Errorf("GRIDCITY_PUBLIC_URL: public URL %q, ACME %v; want https://coord.example.com:8443 from ACME", o.public, o.acme())
	}
}

// With --public-url and a certificate of its own, the coordinator serves
// the MCP endpoint and the app over TLS on the public listener, to the
// public host alone, with HSTS and a Secure cookie, and metrics only with
// a token; --http goes on as before, plain HTTP on loopback; `gridcity mcp`
// prints the public endpoint. The listener is bound to a port of the
// test's while the URL says 8443, as behind a port forward.
func TestServePublicWithFiles(t *testing.T) {
	const public = "https://coord.test:8443"
	cert, key := certtest.Write(t, "coord.test")
	addr, data := serveInProcess(t, "--public-url", public, "--https", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	info, err := readRuntime(data)
	if err != nil {
		t.Fatal(err)
	}
	if info.PublicURL != public || info.HTTPS == "" || info.TLS {
		t.Fatalf("coordinator.json: publicURL %q, https %q, tls %v; want %s, the listener's address, and plain HTTP on --http", info.PublicURL, info.HTTPS, info.TLS, public)
	}
	client := certtest.Client(t, certtest.Pool(t, cert), info.HTTPS)
	tok, err := os.ReadFile(filepath.Join(data, localTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))

	get := func(c *http.Client, url, host string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v", url, host, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	t.Run("public listener", func(t *testing.T) {
		for _, tt := range []struct {
			path, host string
			want       int
		}{
			{"/healthz", "", 200},
			{"/", "", 200},
			{"/mcp", "", 401},
			{"/metrics", "", 401},
			{"/api/me", "", 401},
			{"/healthz", "evil.example:8443", 421},
			{"/healthz", "127.0.0.1:8443", 421},
			{"/mcp", "localhost", 421},
		} {
			res, body := get(client, public+tt.path, tt.host)
			if res.StatusCode != tt.want {
				t.Errorf("GET %s with Host %q: got %d %q; want %d", tt.path, tt.host, res.StatusCode, body, tt.want)
			}
			if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
				t.Errorf("GET %s: Strict-Transport-Security %q; want max-age=31536000", tt.path, got)
			}
			if res.TLS == nil {
				t.Errorf("GET %s: not over TLS", tt.path)
			}
		}
	})
	t.Run("loopback listener", func(t *testing.T) {
		res, body := get(http.DefaultClient, "http://"+addr+"/healthz", "")
		if res.StatusCode != 200 || res.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET /healthz on --http: %d %q, HSTS %q; want 200 and no HSTS over plain HTTP", res.StatusCode, body, res.Header.Get("Strict-Transport-Security"))
		}
	})
	t.Run("OAuth issuer", func(t *testing.T) {
		// Each listener is its own authorization server, named by the URL
		// it is reached at, and its 401 points at its own metadata.
		for _, tt := range []struct {
			c    *http.Client
			base string
		}{{client, public}, {http.DefaultClient, "http://" + addr}} {
			res, body := get(tt.c, tt.base+"/.well-known/oauth-authorization-server", "")
			if res.StatusCode != 200 || !strings.Contains(body, `"issuer":"`+tt.base+`"`) || !strings.Contains(body, `"token_endpoint":"`+tt.base+`/oauth/token"`) {
				t.Errorf("%s metadata: %d %s", tt.base, res.StatusCode, body)
			}
			res, _ = get(tt.c, tt.base+"/mcp", "")
			if want := `Bearer resource_metadata="` + tt.base + `/.well-known/oauth-protected-resource/mcp"`; res.Header.Get("WWW-Authenticate") != want {
				t.Errorf("%s/mcp: WWW-Authenticate %q; want %s", tt.base, res.Header.Get("WWW-Authenticate"), want)
			}
		}
	})
	t.Run("MCP client", func(t *testing.T) {
		hc := &http.Client{Transport: tokenOver{token: token, next: client.Transport}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "public-url-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: public + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "list_servers" }) {
			t.Fatalf("tools %+v; want list_servers among them", res.Tools)
		}
	})
	t.Run("cookies", func(t *testing.T) {
		pw, err := os.ReadFile(filepath.Join(data, "admin-password"))
		if err != nil {
			t.Fatal(err)
		}
		login := `{"username":"admin","password":"` + strings.TrimSpace(string(pw)) + `"}`
		for _, tt := range []struct {
			c           *http.Client
			url, origin string
			cookie      string
			secure      bool
		}{
			{client, public + "/api/login", public, "__Host-gridcity_session=", true},
			{http.DefaultClient, "http://" + addr + "/api/login", "http://" + addr, "gridcity_session=", false},
		} {
			req, _ := http.NewRequest("POST", tt.url, strings.NewReader(login))
			req.Header.Set("Origin", tt.origin)
			req.Header.Set("Content-Type", "application/json")
			res, err := tt.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			set := res.Header.Get("Set-Cookie")
			if res.StatusCode != 200 || !strings.HasPrefix(set, tt.cookie) || strings.Contains(set, "Secure") != tt.secure {
				t.Errorf("POST %s: %d %q, Set-Cookie %q; want 200 and a cookie %s… (Secure: %v)", tt.url, res.StatusCode, b, set, tt.cookie, tt.secure)
			}
		}
		// A page elsewhere cannot log in through the public listener.
		req, _ := http.NewRequest("POST", public+"/api/login", strings.NewReader(login))
		req.Header.Set("Origin", "https://evil.example")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 403 {
			t.Errorf("POST /api/login from Origin https://evil.example: %d; want 403", res.StatusCode)
		}
	})
	t.Run("gridcity mcp", func(t *testing.T) {
		var out bytes.Buffer
		if err := cmdMCP(context.Background(), []string{"--data", data, "--json"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var got struct{ Endpoint string }
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Endpoint != public+"/mcp" {
			t.Errorf("gridcity mcp --json: endpoint %q (%v); want %s/mcp", got.Endpoint, err, public)
		}
		out.Reset()
		if err := cmdMCP(context.Background(), []string{"--data", data}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "MCP endpoint:  "+public+"/mcp") || !strings.Contains(out.String(), "On this host:  http://"+addr+"/mcp") {
			t.Errorf("gridcity mcp printed %q; want the public endpoint, then the local one", out.String())
		}
		if got := dataDirEndpoint(data); got != "http://"+addr+"/mcp" {
			t.Errorf("the stdio bridge's endpoint: %q; want the local one, http://%s/mcp", got, addr)
		}
	})
}

// tokenOver sends the token with every request, over next.
type tokenOver struct {
	token string
	next  http.RoundTripper
}

func (b tokenOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Without --public-url, --tls-cert and --tls-key make --http serve HTTPS as
// before (now read again when the files change), with no public listener.
func TestServeHTTPWithTLSFiles(t *testing.T) {
	cert, key := certtest.Write(t, "localhost")
	addr, data := serveInProcess(t, "--tls-cert", cert, "--tls-key", key)
	info, err := readRuntime(data)
	if err != nil {
		t.Fatal(err)
	}
	if !info.TLS || info.PublicURL != "" || info.HTTPS != "" {
		t.Fatalf("coordinator.json: tls %v, publicURL %q, https %q; want TLS on --http and no public listener", info.TLS, info.PublicURL, info.HTTPS)
	}
	_, port, _ := net.SplitHostPort(addr)
	res, err := certtest.Client(t, certtest.Pool(t, cert), addr).Get("https://localhost:" + port + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil || res.Header.Get("Strict-Transport-Security") != "" {
		t.Errorf("GET /healthz: %d, TLS %v, HSTS %q; want 200 over TLS (HSTS is the public listener's)", res.StatusCode, res.TLS != nil, res.Header.Get("Strict-Transport-Security"))
	}
	if got := mcpEndpoint(info); got != "https://"+addr+"/mcp" {
		t.Errorf("gridcity mcp's endpoint: %q; want https://%s/mcp", got, addr)
	}
}

// With --public-url, notifications and the tools' links point at the public
// URL unless --app-url says otherwise.
func TestAppURLIsThePublicURL(t *testing.T) {
	u, err := publicurl.Parse("https://coord.example.com")
	if err != nil {
		t.Fatal(err)
	}
	c := &coordinator{o: serveOptions{public: u}, info: runtimeInfo{HTTP: "127.0.0.1:4600"}}
	if got := c.appURL(); got != "https://coord.example.com/" {
		t.Errorf("app URL with --public-url: %q; want https://coord.example.com/", got)
	}
	c.o.public = publicurl.URL{}
	if got := c.appURL(); got != "http://127.0.0.1:4600/" {
		t.Errorf("app URL without: %q; want http://127.0.0.1:4600/", got)
	}
}
