package link

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gridcity/gridcity/lib/atomicfile"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// coordinatorsFile keeps the addresses of every coordinator of the fleet
// the agent was last told of, so that an agent started while its own
// coordinator is down still knows the others.
const coordinatorsFile = "coordinators.json"

type coordinatorsState struct {
	GRPCAddresses []string `json:"grpcAddresses"`
}

// coordinators is where the agent may connect: the address it enrolled
// with, always first, then the replicas the coordinators told it of, in a
// turn of this agent's own (see gridcityv1.ReplicaOrder).
type coordinators struct {
	dir      string // "" keeps the list in memory only
	enrolled string
	agent    string // this agent's name, which sets its turn

	mu    sync.Mutex
	known []string
}

// loadCoordinators reads the list kept in dir; a missing file is an empty
// list, a damaged one an error (the caller goes on with the enrollment
// address: the list comes back with the next connection).
func loadCoordinators(dir, enrolled, agent string) (*coordinators, error) {
	c := &coordinators{dir: dir, enrolled: enrolled, agent: agent}
	if dir == "" {
		return c, nil
	}
	path := filepath.Join(dir, coordinatorsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read the coordinators' addresses: %w", err)
	}
	var s coordinatorsState
	if err := json.Unmarshal(b, &s); err != nil {
		return c, fmt.Errorf("the coordinators' addresses in %s are damaged (%v); they are written again when a coordinator sends them", path, err)
	}
	if err := gridcityv1.CheckReplicas(&gridcityv1.Replicas{GrpcAddresses: s.GRPCAddresses}); err != nil {
		return c, fmt.Errorf("the coordinators' addresses in %s are unusable (%v); they are written again when a coordinator sends them", path, err)
	}
	c.known = s.GRPCAddresses
	return c, nil
}

// set replaces the known replicas with what a coordinator sent, written
// durably when it changed. A list that fails the checks is refused whole.
func (c *coordinators) set(r *gridcityv1.Replicas) (changed bool, err error) {
	if err := gridcityv1.CheckReplicas(r); err != nil {
		return false, err
	}
	addrs := slices.Clone(r.GetGrpcAddresses())
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Equal(addrs, c.known) {
		return false, nil
	}
	if c.dir != "" {
		b, err := json.MarshalIndent(coordinatorsState{GRPCAddresses: addrs}, "", "  ")
		if err != nil {
			return false, err
		}
		if err := atomicfile.Write(c.dir, coordinatorsFile, b); err != nil {
			return false, fmt.Errorf("keep the coordinators' addresses: %w", err)
		}
	}
	c.known = addrs
	return true, nil
}

// order is every address to try, the enrollment address first.
func (c *coordinators) order() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return gridcityv1.ReplicaOrder(c.enrolled, c.known, c.agent)
}

// after is the address to try once addr has failed: the next in order,
// wrapping round to the enrollment address (the first when addr is no
// longer listed).
func (c *coordinators) after(addr string) string {
	return gridcityv1.NextReplica(c.order(), addr)
}
