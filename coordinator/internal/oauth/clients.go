package oauth

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// ClientStore is what listing and removing clients reads and writes.
type ClientStore interface {
	OAuthClients(ctx context.Context) ([]store.OAuthClient, error)
	OAuthTokens(ctx context.Context, client string) ([]store.OAuthToken, error)
	RemoveOAuthClient(ctx context.Context, id string, at time.Time) error
}

// Connected is a registered client as `gridcity token list` and the app
// show it.
type Connected struct {
	ID           string    `json:"clientId"`
	Name         string    `json:"name"`
	Registration string    `json:"registration"` // dcr or cimd
	Scope        string    `json:"scope"`        // the widest of its live tokens; none without one
	Approvers    []string  `json:"approvers"`    // who granted its live tokens
	CreatedAt    time.Time `json:"createdAt"`
	RemovedAt    time.Time `json:"-"`
}

// Clients lists every registered client, removed ones included, oldest
// first, with what its live tokens at now allow.
func Clients(ctx context.Context, st ClientStore, now time.Time) ([]Connected, error) {
	cs, err := st.OAuthClients(ctx)
	if err != nil {
		return nil, err
	}
	out := []Connected{}
	for _, c := range cs {
		r := Connected{ID: c.ID, Name: c.Name, Registration: c.Registration, Scope: "none", Approvers: []string{}, CreatedAt: c.CreatedAt, RemovedAt: c.RemovedAt}
		toks, err := st.OAuthTokens(ctx, c.ID)
		if err != nil {
			return nil, fmt.Errorf("read the tokens of OAuth client %q: %w", c.ID, err)
		}
		for _, t := range toks {
			if !t.RevokedAt.IsZero() || !now.Before(t.ExpiresAt) {
				continue
			}
			if r.Scope != string(store.ScopeOperate) {
				r.Scope = string(t.Scope)
			}
			if !slices.Contains(r.Approvers, t.Approver) {
				r.Approvers = append(r.Approvers, t.Approver)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Remove removes a client and revokes its tokens: it must sign in again.
func Remove(ctx context.Context, st ClientStore, id string, at time.Time) error {
	return st.RemoveOAuthClient(ctx, id, at)
}
