//go:build unix

package runner

import (
	"fmt"
	"os/user"
	"reflect"
	"syscall"
	"testing"
)

// fakeUsers is a user database of two users and root.
type fakeUsers map[string]*user.User

func (f fakeUsers) Lookup(name string) (*user.User, error) {
	if u, ok := f[name]; ok {
		return u, nil
	}
	return nil, user.UnknownUserError(name)
}

func (f fakeUsers) LookupId(uid string) (*user.User, error) {
	for _, u := range f {
		if u.Uid == uid {
			return u, nil
		}
	}
	return nil, user.UnknownUserIdError(0)
}

func (fakeUsers) GroupIds(u *user.User) ([]string, error) {
	if u.Username == "alice" {
		return []string{"1000", "27", "100"}, nil
	}
	return []string{u.Gid}, nil
}

func TestResolveRunAs(t *testing.T) {
	db := fakeUsers{
		"root":  {Uid: "0", Gid: "0", Username: "root", HomeDir: "/root"},
		"alice": {Uid: "1000", Gid: "1000", Username: "alice", HomeDir: "/home/alice"},
		"bob":   {Uid: "1001", Gid: "1001", Username: "bob", HomeDir: "/home/bob"},
	}
	tests := []struct {
		name    string
		runAs   string
		euid    int
		want    runIdentity
		wantErr string
	}{
		{name: "root agent, own user", runAs: "", euid: 0, want: runIdentity{name: "root", home: "/root"}},
		{name: "root agent, root by name", runAs: "root", euid: 0, want: runIdentity{name: "root", home: "/root"}},
		{
			name: "root agent, another user", runAs: "alice", euid: 0,
			want: runIdentity{name: "alice", uid: 1000, gid: 1000, home: "/home/alice", cred: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{1000, 27, 100}}},
		},
		{name: "user agent, itself", runAs: "bob", euid: 1001, want: runIdentity{name: "bob", uid: 1001, gid: 1001, home: "/home/bob"}},
		{name: "user agent, own user", runAs: "", euid: 1001, want: runIdentity{name: "bob", uid: 1001, gid: 1001, home: "/home/bob"}},
		{name: "user agent, another user", runAs: "alice", euid: 1001, wantErr: "the agent runs as bob and cannot run commands as alice: run the agent as root or set runAs: bob"},
		{name: "user agent, root", runAs: "root", euid: 1001, wantErr: "the agent runs as bob and cannot run commands as root: run the agent as root or set runAs: bob"},
		{name: "unknown user", runAs: "carol", euid: 0, wantErr: `run as "carol": user: unknown user carol`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveRunAs(tt.runAs, tt.euid, db)
			if fmt.Sprint(err) != fmt.Sprint(errOrNil(tt.wantErr)) {
				t.Fatalf("got error %v; want %q", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v (cred %+v); want %+v (cred %+v)", got, got.cred, tt.want, tt.want.cred)
			}
		})
	}
}

// A uid with no passwd entry still runs commands as itself.
func TestResolveRunAsUnnamedUID(t *testing.T) {
	got, err := resolveRunAs("", 4321, fakeUsers{})
	if err != nil || got.name != "uid 4321" || got.uid != 4321 || got.cred != nil || got.dir() != "/" {
		t.Errorf("got %+v, %v; want uid 4321 as itself in /", got, err)
	}
}

func errOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
