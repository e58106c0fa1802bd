package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Consent is the authorization server's consent step, and its connected
// clients, as the app drives them; *oauth.Server satisfies it.
type Consent interface {
	Pending(id string) (oauth.Request, error)
	Grant(ctx context.Context, id, approver string, scope store.Scope) (redirect string, err error)
	Deny(id, approver string) (redirect string, err error)
	// Clients lists the clients that may sign in.
	Clients(ctx context.Context) ([]oauth.Connected, error)
	// Remove removes a client and revokes its tokens.
	Remove(ctx context.Context, id, approver string) error
}

const maxGrantBody = 1 << 10

// routeOAuth serves the consent of an MCP client's sign-in (the page at
// #oauth/ID reads the request and grants or denies it) and the connected
// clients (#clients). Same session and CSRF rules as every other call.
// Without an authorization server, these paths are the API's 404.
func (a *app) routeOAuth(mux *http.ServeMux) {
	o := a.cfg.OAuth
	if o == nil {
		return
	}
	answer := func(w http.ResponseWriter, r *http.Request, v any, err error) {
		if err != nil {
			a.oauthError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
	mux.Handle("GET /api/oauth/requests/{id}", a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
		req, err := o.Pending(r.PathValue("id"))
		answer(w, r, req, err)
	}))
	mux.Handle("POST /api/oauth/requests/{id}/grant", a.authed(func(w http.ResponseWriter, r *http.Request, se store.Session) {
		var in struct {
			Scope string `json:"scope"`
		}
		if code, msg := decodeJSON(w, r, maxGrantBody, &in); code != 0 {
			writeError(w, code, msg)
			return
		}
		to, err := o.Grant(r.Context(), r.PathValue("id"), se.Approver, store.Scope(in.Scope))
		answer(w, r, map[string]string{"redirect": to}, err)
	}))
	mux.Handle("POST /api/oauth/requests/{id}/deny", a.authed(func(w http.ResponseWriter, r *http.Request, se store.Session) {
		to, err := o.Deny(r.PathValue("id"), se.Approver)
		answer(w, r, map[string]string{"redirect": to}, err)
	}))
	mux.Handle("GET /api/oauth/clients", a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
		cs, err := o.Clients(r.Context())
		answer(w, r, cs, err)
	}))
	// The id is in the body: a Client ID Metadata Document's id is a URL.
	mux.Handle("POST /api/oauth/clients/revoke", a.authed(func(w http.ResponseWriter, r *http.Request, se store.Session) {
		var in struct {
			ClientID string `json:"clientId"`
		}
		if code, msg := decodeJSON(w, r, maxGrantBody, &in); code != 0 {
			writeError(w, code, msg)
			return
		}
		answer(w, r, map[string]string{"removed": in.ClientID}, o.Remove(r.Context(), in.ClientID, se.Approver))
	}))
}

func (a *app) oauthError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, oauth.ErrNoRequest):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such connected client; reload the list")
	case errors.Is(err, oauth.ErrScope):
		writeError(w, http.StatusBadRequest, err.Error())
	case a.storeDown(w, r, err):
	default:
		a.log.Error("oauth consent failed", "err", err)
		writeError(w, http.StatusInternalServerError, "the sign-in could not be recorded: "+err.Error())
	}
}
