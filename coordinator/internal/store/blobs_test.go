package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// SwapBlob replaces a blob only from the value it was read as: of several
// coordinators rewriting one blob from the same value at once (the CA key
// sealed at start), one wins and the others are told it changed.
func TestSwapBlob(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		if err := a.SwapBlob(ctx, "ca.pem", []byte("clear"), []byte("sealed")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("swap of a missing blob: %v; want ErrNotFound", err)
		}
		if _, err := a.PutBlobIfAbsent(ctx, "ca.pem", []byte("clear")); err != nil {
			t.Fatal(err)
		}
		if err := a.SwapBlob(ctx, "ca.pem", []byte("other"), []byte("sealed")); !errors.Is(err, ErrBlobChanged) {
			t.Fatalf("swap from a value it does not hold: %v; want ErrBlobChanged", err)
		}
		errs := make([]error, 6)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range errs {
			s := []Store{a, b}[i%2]
			wg.Go(func() {
				<-start
				errs[i] = s.SwapBlob(ctx, "ca.pem", []byte("clear"), fmt.Appendf(nil, "sealed %d", i))
			})
		}
		close(start)
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("swaps %d and %d both won", won, i)
			case err == nil:
				won = i
			case !errors.Is(err, ErrBlobChanged):
				t.Fatalf("a losing swap: %v; want ErrBlobChanged", err)
			}
		}
		if won < 0 {
			t.Fatal("no swap won")
		}
		if v, err := b.Blob(ctx, "ca.pem"); err != nil || string(v) != fmt.Sprint("sealed ", won) {
			t.Fatalf("blob %q, %v; want the winner's value", v, err)
		}
	})
}
