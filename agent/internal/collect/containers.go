package collect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("containers", TierMedium, newContainersCollector) }

const (
	// maxDockerBody bounds the container list the daemon may send; a
	// container takes a few KiB of JSON.
	maxDockerBody = 8 << 20
	// maxContainers bounds the containers reported.
	maxContainers = 1024
	// dockerTimeout bounds one request; a wedged daemon is a gap, not a
	// stalled agent.
	dockerTimeout = 10 * time.Second
	// dockerListURL has no API version in its path: the daemon then speaks
	// its own current version, which works from Docker 1.x to Engine 29
	// (which refuses versions older than 1.44) and on Podman's socket.
	dockerListURL = "http://docker/containers/json?all=1"
)

// containersCollector lists containers through the Docker Engine API on
// its unix socket with plain net/http: the SDK would add megabytes to the
// agent for one call.
type containersCollector struct {
	socket string
	client *http.Client
}

func newContainersCollector(cfg Config, _ *slog.Logger) collector {
	socket := cfg.DockerSocket
	dialer := &net.Dialer{}
	return &containersCollector{
		socket: socket,
		client: &http.Client{
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return dialer.DialContext(ctx, "unix", socket)
				},
				MaxIdleConns:          1,
				IdleConnTimeout:       time.Minute,
				ResponseHeaderTimeout: dockerTimeout,
			},
			Timeout: dockerTimeout,
		},
	}
}

func (c *containersCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, _ *notes) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dockerListURL, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// Name the socket and the dial error, not the placeholder URL.
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Errorf("docker socket %s: %w", c.socket, opErr.Err)
		}
		return fmt.Errorf("docker socket %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	body := &cappedReader{r: resp.Body, left: maxDockerBody}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(body, maxReason))
		return fmt.Errorf("docker socket %s: GET /containers/json: %s: %s", c.socket, resp.Status, strings.TrimSpace(string(msg)))
	}
	cs, err := decodeContainers(body)
	if err != nil {
		return fmt.Errorf("docker socket %s: container list: %w", c.socket, err)
	}
	out.Containers = cs
	return nil
}

// dockerContainer is the part of a /containers/json entry we use.
type dockerContainer struct {
	ID      string   `json:"Id"`
	Names   []string `json:"Names"`
	Image   string   `json:"Image"`
	State   string   `json:"State"`
	Status  string   `json:"Status"`
	Created int64    `json:"Created"`
}

// decodeContainers reads a /containers/json body into the section: ids
// cut to the 12 characters docker shows, names without the leading slash,
// sorted by name, at most maxContainers.
func decodeContainers(r io.Reader) (*gridcityv1.Containers, error) {
	var list []dockerContainer
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, err
	}
	cs := &gridcityv1.Containers{Items: make([]*gridcityv1.Container, 0, min(len(list), maxContainers))}
	for _, d := range list {
		name := ""
		if len(d.Names) > 0 {
			name = strings.TrimPrefix(d.Names[0], "/")
		}
		cs.Items = append(cs.Items, &gridcityv1.Container{
			Id:          clean(d.ID[:min(len(d.ID), 12)], maxName),
			Name:        clean(name, maxName),
			Image:       clean(d.Image, maxName),
			State:       clean(d.State, maxName),
			Status:      clean(d.Status, maxName),
			CreatedUnix: d.Created,
		})
	}
	sort.Slice(cs.Items, func(i, j int) bool {
		a, b := cs.Items[i], cs.Items[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Id < b.Id
	})
	cs.Items = cs.Items[:min(len(cs.Items), maxContainers)]
	return cs, nil
}

// errBodyTooLarge is what a cappedReader returns past its limit, so that a
// huge body reads as that and not as a JSON syntax error.
var errBodyTooLarge = fmt.Errorf("response larger than %d MiB", maxDockerBody>>20)

type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
