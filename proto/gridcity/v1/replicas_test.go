package gridcityv1

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckReplicas(t *testing.T) {
	many := make([]string, MaxReplicas+1)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.0.%d:4601", i+1)
	}
	for _, c := range []struct {
		addrs []string
		ok    bool
	}{
		{nil, true},
		{[]string{"10.0.0.1:4601", "coord-b.example:4601", "[2001:db8::1]:4601"}, true},
		{many[:MaxReplicas], true},
		{many, false},
		{[]string{"10.0.0.1"}, false},
		{[]string{":4601"}, false},
		{[]string{"0.0.0.0:4601"}, false},
		{[]string{"[::]:4601"}, false},
		{[]string{"10.0.0.1:0"}, false},
		{[]string{"10.0.0.1:65536"}, false},
		{[]string{"10.0.0.1:grpc"}, false},
		{[]string{strings.Repeat("a", 250) + ".x:4601"}, false},
		{[]string{"10.0.0.1:4601", "10.0.0.1:4601"}, false},
	} {
		err := CheckReplicas(&Replicas{GrpcAddresses: c.addrs})
		if (err == nil) != c.ok {
			t.Errorf("CheckReplicas(%.60q) = %v; want ok=%v", c.addrs, err, c.ok)
		}
	}
}
