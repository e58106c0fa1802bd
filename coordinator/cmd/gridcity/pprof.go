//go:build gridcitypprof

package main

// Built only with -tags gridcitypprof, for bench/profiles.md: the
// product has no profiling endpoint. GRIDCITY_PPROF=127.0.0.1:PORT serves
// net/http/pprof there.

import (
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("GRIDCITY_PPROF")
	if addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		panic("GRIDCITY_PPROF must be a loopback HOST:PORT")
	}
	go func() { _ = http.ListenAndServe(addr, nil) }()
}
