package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// A load balancer's backends are what it uses but the server it runs on:
// that link says where it runs, not where it sends requests.
func TestLoadBalancerBackendsLeaveOutItsHost(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(`
resources:
  - {id: shop-lb, kind: load_balancer, engine: http, target: "http://10.0.4.5/"}
links:
  - {from: shop-lb, to: web-1}
  - {from: shop-lb, to: web-2}
`), "lb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := fleetOf(t, 0, nil)
	for name, addr := range map[string]string{"lb-1": "10.0.4.5", "web-1": "10.0.4.6", "web-2": "10.0.4.7"} {
		id := d.Fleet.Connect(&gridcityv1.Hello{Name: name})
		d.Fleet.Apply(name, id, &gridcityv1.StateUpdate{Full: true, Host: &gridcityv1.HostInfo{Hostname: name, Addresses: []string{addr}},
			Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Address: "0.0.0.0", Port: 80, Process: "nginx"}}}})
	}
	prober := resources.New(cfg, slog.New(slog.DiscardHandler))
	d.Topology, d.Resources = topology.New(cfg, d.Fleet, prober), prober
	g, err := d.Topology.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if uses := strings.Join(g.Uses("shop-lb"), ","); uses != "lb-1,web-1,web-2" {
		t.Fatalf("shop-lb uses %s; want its host lb-1 and web-1, web-2", uses)
	}
	res, err := memSession(t, d).CallTool(context.Background(), &mcp.CallToolParams{Name: "list_resources", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_resources: %v %+v", err, res)
	}
	var out fleetview.ResourcesOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || len(out.Resources) != 1 {
		t.Fatalf("resources %s (%v)", b, err)
	}
	var ids []string
	for _, be := range out.Resources[0].Backends {
		ids = append(ids, be.ID)
	}
	if got := strings.Join(ids, ","); got != "web-1,web-2" {
		t.Errorf("shop-lb backends %s; want web-1,web-2", got)
	}
}
