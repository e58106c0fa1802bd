package probe

import (
	"context"
	"net/http"
)

// probeS3 HEADs a bucket URL (https://bucket.s3.region.amazonaws.com/ or https://host/bucket).
// Anonymous access tells whether the bucket exists: 200 (public) and 403 (private) both do;
// 301 with x-amz-bucket-region means it exists in another region than the endpoint's.
func probeS3(ctx context.Context, target string) Result {
	u, err := targetURL("https", target)
	if err != nil {
		u, err = targetURL("http", target) // a MinIO or test endpoint may be plain http
		if err != nil {
			return fail(err)
		}
	}
	resp, notAfter, err := roundTrip(ctx, http.MethodHead, u)
	if err != nil {
		return Result{Reason: httpReason(err, u), TLSNotAfter: notAfter}
	}
	resp.Body.Close() // HEAD: no body
	res := Result{TLSNotAfter: notAfter, Metrics: map[string]float64{"status_code": float64(resp.StatusCode)}}
	switch {
	case resp.StatusCode == http.StatusOK:
		res.OK = true
	case resp.StatusCode == http.StatusForbidden:
		res.OK = true
		res.Metrics["auth_required"] = 1
	case resp.StatusCode == http.StatusMovedPermanently && resp.Header.Get("X-Amz-Bucket-Region") != "":
		res.OK = true
	case resp.StatusCode == http.StatusNotFound:
		res.Reason = "bucket not found (" + statusText(resp) + ")"
	default:
		res.Reason = statusText(resp)
	}
	tlsMetrics(&res)
	return res
}
