package probe

import "context"

// probeTCP checks that target (host:port) accepts a TCP connection.
func probeTCP(ctx context.Context, target string) Result {
	c, err := dial(ctx, target, "")
	if err != nil {
		return fail(err)
	}
	c.Close()
	return Result{OK: true}
}
