package gridcityv1

import (
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
)

// MaxReplicas bounds a Replicas list: a fleet runs a few coordinators, and
// an agent dials the list in turn.
const MaxReplicas = 32

// CheckReplicaAddress checks that addr is an address an agent can dial:
// HOST:PORT with a host (not an unspecified one such as 0.0.0.0, which
// names no machine) and a port from 1 to 65535.
func CheckReplicaAddress(addr string) error {
	const hint = "want HOST:PORT that agents can dial, as --advertise gives it"
	if len(addr) > 255 {
		return fmt.Errorf("coordinator address %q is longer than 255 bytes: %s", shorten(addr), hint)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("coordinator address %q is not HOST:PORT: %s", shorten(addr), hint)
	}
	if host == "" {
		return fmt.Errorf("coordinator address %q has no host: %s", shorten(addr), hint)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("coordinator address %q names no machine (%s listens everywhere): %s", shorten(addr), host, hint)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("coordinator address %q has no port from 1 to 65535: %s", shorten(addr), hint)
	}
	return nil
}

// CheckReplicas checks a list of coordinators: at most MaxReplicas, each
// address valid and listed once.
func CheckReplicas(r *Replicas) error {
	addrs := r.GetGrpcAddresses()
	if len(addrs) > MaxReplicas {
		return fmt.Errorf("%d coordinator addresses: at most %d are kept", len(addrs), MaxReplicas)
	}
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if err := CheckReplicaAddress(a); err != nil {
			return err
		}
		if seen[a] {
			return fmt.Errorf("coordinator address %q is listed twice", shorten(a))
		}
		seen[a] = true
	}
	return nil
}

// ReplicaOrder is the order in which an agent tries the coordinators: the
// address it enrolled with first, then the others it was told of, each
// once, rotated by a hash of the agent's name. The rotation spreads the
// agents that enrolled through one coordinator over the survivors when it
// dies, rather than sending them all to the same next one; each agent's
// order stays the same from one try to the next, so it still tries every
// coordinator in turn.
func ReplicaOrder(enrolled string, known []string, agent string) []string {
	rest := make([]string, 0, len(known))
	for _, a := range known {
		if a != enrolled && !slices.Contains(rest, a) {
			rest = append(rest, a)
		}
	}
	out := []string{enrolled}
	if len(rest) == 0 {
		return out
	}
	h := fnv.New32a()
	h.Write([]byte(agent))
	k := int(h.Sum32() % uint32(len(rest)))
	return append(append(out, rest[k:]...), rest[:k]...)
}

// NextReplica is the address to try once failed has failed: the next in
// order, wrapping round to the first (the first, too, when failed is no
// longer listed).
func NextReplica(order []string, failed string) string {
	return order[(slices.Index(order, failed)+1)%len(order)]
}
