package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestServeRegistersItsReplica: serve records itself in the store with the
// address agents dial and its HTTP address, before it says it is ready.
func TestServeRegistersItsReplica(t *testing.T) {
	addr, data := serveInProcess(t)
	st, err := store.OpenSQLite(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := st.Replicas(context.Background(), time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].GRPC != "127.0.0.1:4601" || rs[0].HTTP != addr {
		t.Fatalf("replicas %+v; want this coordinator, gRPC 127.0.0.1:4601, HTTP %s", rs, addr)
	}
}

// TestServeRefusesAnAdvertiseAgentsCannotDial: --advertise is the address
// agents are told; one that names no machine or no port is refused at once.
func TestServeRefusesAnAdvertiseAgentsCannotDial(t *testing.T) {
	for _, adv := range []string{"0.0.0.0:4601", "coord.example", "coord.example:0"} {
		err := cmdServe(context.Background(), []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--advertise", adv}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--advertise") {
			t.Errorf("serve --advertise %s: %v; want it refused, naming --advertise", adv, err)
		}
	}
}
