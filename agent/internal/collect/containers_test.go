package collect

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

var fixtureContainers = &gridcityv1.Containers{Items: []*gridcityv1.Container{
	{Id: "a1b2c3d4e5f6", Name: "cache", Image: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", State: "restarting", Status: "Restarting (1) 5 seconds ago", CreatedUnix: 1733100000},
	{Id: "3176a2479c92", Name: "shop-db-1", Image: "postgres:16", State: "exited", Status: "Exited (1) 2 minutes ago", CreatedUnix: 1733054400},
	{Id: "8dfafdbc3a40", Name: "web", Image: "nginx:1.27", State: "running", Status: "Up 3 hours", CreatedUnix: 1733140800},
}}

func TestDecodeContainers(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *gridcityv1.Containers
		wantErr bool
	}{
		{name: "fixture", in: mustRead(t, "testdata/docker/containers.json"), want: fixtureContainers},
		{name: "empty", in: "[]", want: &gridcityv1.Containers{}},
		{name: "no names", in: `[{"Id":"abc","State":"created"}]`, want: &gridcityv1.Containers{Items: []*gridcityv1.Container{{Id: "abc", State: "created"}}}},
		{name: "not a list", in: `{"message":"page not found"}`, wantErr: true},
		{name: "truncated", in: `[{"Id":"abc"`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeContainers(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if err == nil && !proto.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(tt.want))
			}
		})
	}
}

func FuzzDecodeContainers(f *testing.F) {
	f.Add([]byte(`[{"Id":"8dfafdbc3a40e3a7","Names":["/web"],"Image":"nginx","State":"running","Status":"Up","Created":1}]`))
	f.Add([]byte(`[{"Id":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9","Names":["/\n"]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := decodeContainers(&cappedReader{r: bytes.NewReader(data), left: maxDockerBody})
		if err != nil {
			return
		}
		if len(cs.Items) > maxContainers {
			t.Fatalf("got %d containers; want at most %d", len(cs.Items), maxContainers)
		}
		for _, c := range cs.Items {
			for _, s := range []string{c.Id, c.Name, c.Image, c.State, c.Status} {
				if len(s) > maxName || !fitText(s) {
					t.Fatalf("field %q too long or not clean", s)
				}
			}
			if len(c.Id) > 12*3 {
				t.Fatalf("id %q longer than 12 characters", c.Id)
			}
		}
	})
}

// serveDocker serves handler on a unix socket in a temporary directory, as
// the Docker daemon does, and returns the socket's path.
func serveDocker(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

func TestContainersCollector(t *testing.T) {
	fixture, err := os.ReadFile("testdata/docker/containers.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    *gridcityv1.Containers
		wantErr string
	}{
		{
			name: "list",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/containers/json" || r.URL.Query().Get("all") != "1" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(fixture)
			},
			want: fixtureContainers,
		},
		{
			name: "daemon error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"message":"client version 1.24 is too old"}`, http.StatusBadRequest)
			},
			wantErr: `GET /containers/json: 400 Bad Request: {"message":"client version 1.24 is too old"}`,
		},
		{
			name: "body over the bound",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("["))
				item := []byte(`{"Id":"` + strings.Repeat("a", 1000) + `"},`)
				for range maxDockerBody/len(item) + 1 {
					w.Write(item)
				}
			},
			wantErr: "container list: response larger than 8 MiB",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := serveDocker(t, tt.handler)
			c := newContainersCollector(Config{DockerSocket: sock}, nil)
			var out gridcityv1.StateUpdate
			err := c.update(context.Background(), &out, &notes{name: "containers"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), sock) {
					t.Fatalf("got error %v; want one naming %s with %q", err, sock, tt.wantErr)
				}
				if out.Containers != nil {
					t.Error("section set despite the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(out.GetContainers(), tt.want) {
				t.Errorf("got\n%s\nwant\n%s", prototext.Format(out.GetContainers()), prototext.Format(tt.want))
			}
		})
	}
}

func TestContainersNoSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	c := newContainersCollector(Config{DockerSocket: sock}, nil)
	err := c.update(context.Background(), &gridcityv1.StateUpdate{}, &notes{name: "containers"})
	if want := "docker socket " + sock + ": connect: no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("got %v; want %q", err, want)
	}
}
