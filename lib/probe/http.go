package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	maxRedirects       = 3
	maxBody            = 64 << 10
	maxResponseHeaders = 64 << 10
)

// rootCAs verifies server certificates; nil means the system roots. Tests replace it.
var rootCAs *x509.CertPool

// httpClient builds a client for one probe: no proxy (a probe checks the path from here to the
// target, not the proxy), no kept-alive connections, at most maxRedirects redirects.
func httpClient() *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{}).DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12},
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: maxResponseHeaders,
		ForceAttemptHTTP2:      false,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return http.ErrUseLastResponse // the answer is the last redirect itself
			}
			return nil
		},
	}
}

// targetURL adds scheme to a target that has none and checks that the scheme matches.
func targetURL(scheme, target string) (*url.URL, error) {
	if !strings.Contains(target, "://") {
		target = scheme + "://" + target
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("parse target %q: %w", target, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("target %q names no host", target)
	}
	if scheme == "https" && u.Scheme != "https" {
		return nil, fmt.Errorf("https probe needs an https URL, got %q", target)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target %q: scheme must be http or https", target)
	}
	return u, nil
}

// probeHTTP GETs target; any status below 500 means the server answers.
func probeHTTP(ctx context.Context, scheme, target string) Result {
	u, err := targetURL(scheme, target)
	if err != nil {
		return fail(err)
	}
	resp, notAfter, err := roundTrip(ctx, http.MethodGet, u)
	if err != nil {
		return Result{Reason: httpReason(err, u), TLSNotAfter: notAfter}
	}
	defer resp.Body.Close()
	// A reply is not whole until read; the first bytes are kept, because a
	// failing health check usually says why ("orders-db: connection refused").
	head := make([]byte, bodyExcerpt)
	n, _ := io.ReadFull(resp.Body, head)
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody-int64(n)))

	res := Result{OK: resp.StatusCode < 500, TLSNotAfter: notAfter,
		Metrics: map[string]float64{"status_code": float64(resp.StatusCode)}}
	if !res.OK {
		res.Reason = statusText(resp)
		// Only text and JSON, as health endpoints answer; an HTML error
		// page says nothing the status line does not.
		ct := resp.Header.Get("Content-Type")
		textual := strings.HasPrefix(ct, "text/plain") || strings.HasPrefix(ct, "application/json")
		if excerpt := strings.TrimSpace(string(head[:n])); textual && excerpt != "" {
			// clean (in Run) bounds it and strips control characters: the
			// body is the target's text, reported as data.
			res.Reason += ": " + excerpt
		}
	}
	tlsMetrics(&res)
	return res
}

// roundTrip sends one request and returns the leaf certificate's NotAfter when there is one,
// from the verified chain or, when verification failed, from the certificate that failed it:
// an expired certificate is exactly when its date matters.
func roundTrip(ctx context.Context, method string, u *url.URL) (*http.Response, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("User-Agent", "gridcity-probe")
	resp, err := httpClient().Do(req)
	if err != nil {
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) && len(verr.UnverifiedCertificates) > 0 {
			return nil, verr.UnverifiedCertificates[0].NotAfter, err
		}
		return nil, time.Time{}, err
	}
	var notAfter time.Time
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		notAfter = resp.TLS.PeerCertificates[0].NotAfter
	}
	return resp, notAfter, nil
}

// httpReason is the Go error text, without the `Get "url": ` prefix when it failed at the
// probed URL itself (the target is already known), kept when a redirect led elsewhere.
func httpReason(err error, u *url.URL) string {
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.URL == u.String() {
		return uerr.Err.Error()
	}
	return err.Error()
}

func tlsMetrics(res *Result) {
	if res.TLSNotAfter.IsZero() {
		return
	}
	if res.Metrics == nil {
		res.Metrics = map[string]float64{}
	}
	res.Metrics["days_left"] = time.Until(res.TLSNotAfter).Hours() / 24
}

// statusText is "HTTP 503 Service Unavailable": the standard text rather than the server's own
// ("Service Temporarily Unavailable" from nginx), so that one failure reads the same everywhere.
// bodyExcerpt is how much of a failing reply's body goes into the reason.
const bodyExcerpt = 200

func statusText(resp *http.Response) string {
	if t := http.StatusText(resp.StatusCode); t != "" {
		return fmt.Sprintf("HTTP %d %s", resp.StatusCode, t)
	}
	return "HTTP " + resp.Status
}
