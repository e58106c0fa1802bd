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

// routeOAuth serves the consent of an MCP client's sign-in: the page at
// #oauth/ID reads the request and grants or denies it. Same session and
// CSRF rules as every other call.
func (a *app) routeOAuth(mux *http.ServeMux) {
	a.routeOAuthClients(mux)
	mux.Handle("GET /api/oauth/requests/{id}", a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
		if a.cfg.OAuth == nil {
			writeError(w, http.StatusNotFound, "this coordinator does not serve OAuth")
			return
		}
		req, err := a.cfg.OAuth.Pending(r.PathValue("id"))
		if err != nil {
			a.oauthError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, req)
	}))
	mux.Handle("POST /api/oauth/requests/{id}/grant", a.authed(func(w http.ResponseWriter, r *http.Request, se store.Session) {
		var in struct {
			Scope string `json:"scope"`
		}
		if code, msg := decodeJSON(w, r, maxGrantBody, &in); code != 0 {
			writeError(w, code, msg)
			return
		}
		if a.cfg.OAuth == nil {
			writeError(w, http.StatusNotFound, "this coordinator does not serve OAuth")
			return
		}
		to, err := a.cfg.OAuth.Grant(r.Context(), r.PathValue("id"), se.Approver, store.Scope(in.Scope))
		if err != nil {
			a.oauthError(w, r, err)
			return
		}
		a.log.Info("oauth sign-in granted in the app", "approver", se.Approver, "scope", in.Scope)
		writeJSON(w, http.StatusOK, map[string]string{"redirect": to})
	}))
	mux.Handle("POST /api/oauth/requests/{id}/deny", a.authed(func(w http.ResponseWriter, r *http.Request, se store.Session) {
		if a.cfg.OAuth == nil {
			writeError(w, http.StatusNotFound, "this coordinator does not serve OAuth")
			return
		}
		to, err := a.cfg.OAuth.Deny(r.PathValue("id"), se.Approver)
		if err != nil {
			a.oauthError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"redirect": to})
	}))
}

// routeOAuthClients lists the connected clients and removes one.
func (a *app) routeOAuthClients(mux *http.ServeMux) {
	mux.Handle("GET /api/oauth/clients", a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
		if a.cfg.OAuth == nil {
			writeJSON(w, http.StatusOK, []oauth.Connected{})
			return
		}
		cs, err := a.cfg.OAuth.Clients(r.Context())
		if err != nil {
			a.oauthError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, cs)
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
		if a.cfg.OAuth == nil {
			writeError(w, http.StatusNotFound, "this coordinator does not serve OAuth")
			return
		}
		if err := a.cfg.OAuth.Remove(r.Context(), in.ClientID, se.Approver); errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "no connected client "+in.ClientID+"; reload the list")
			return
		} else if err != nil {
			a.oauthError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"removed": in.ClientID})
	}))
}

func (a *app) oauthError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, oauth.ErrNoRequest):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, oauth.ErrScope):
		writeError(w, http.StatusBadRequest, err.Error())
	case a.storeDown(w, r, err):
	default:
		a.log.Error("oauth consent failed", "err", err)
		writeError(w, http.StatusInternalServerError, "the sign-in could not be recorded: "+err.Error())
	}
}
