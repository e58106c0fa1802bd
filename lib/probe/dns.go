package probe

import (
	"context"
	"fmt"
	"net"
)

// probeDNS resolves target with the system resolver; at least one address is OK.
func probeDNS(ctx context.Context, target string) Result {
	addrs, err := net.DefaultResolver.LookupHost(ctx, target)
	if err != nil {
		return fail(err)
	}
	if len(addrs) == 0 {
		return Result{Reason: fmt.Sprintf("lookup %s: no addresses", target)}
	}
	return Result{OK: true, Metrics: map[string]float64{"addresses": float64(len(addrs))}}
}
