package main

import (
	"github.com/gridcity/gridcity/coordinator/internal/agentapi"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/web"
)

// Each package that keeps or reads something in the store declares the
// few methods it uses; serve hands every one of them the same engine. These
// assertions make an engine that lacks a method some consumer needs fail to
// build here, where the engines and the consumers meet, rather than at the
// line of serve that passes it.
var (
	_ agentapi.Store  = (*store.SQLite)(nil)
	_ agentapi.Store  = (*store.Postgres)(nil)
	_ command.Store   = (*store.SQLite)(nil)
	_ command.Store   = (*store.Postgres)(nil)
	_ fleet.Store     = (*store.SQLite)(nil)
	_ fleet.Store     = (*store.Postgres)(nil)
	_ incidents.Store = (*store.SQLite)(nil)
	_ incidents.Store = (*store.Postgres)(nil)
	_ fleetview.Store = (*store.SQLite)(nil)
	_ fleetview.Store = (*store.Postgres)(nil)
	_ mcpserver.Store = (*store.SQLite)(nil)
	_ mcpserver.Store = (*store.Postgres)(nil)
	_ mcpserver.Store = (*store.SQLite)(nil)
	_ mcpserver.Store = (*store.Postgres)(nil)
	_ pki.Store       = (*store.SQLite)(nil)
	_ pki.Store       = (*store.Postgres)(nil)
	_ web.Store       = (*store.SQLite)(nil)
	_ web.Store       = (*store.Postgres)(nil)
)
