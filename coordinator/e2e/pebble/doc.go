// Package pebble pins Let's Encrypt's pebble, the small ACME server made for
// testing ACME clients, at the version coordinator/e2e's ACME test builds
// (`go build github.com/letsencrypt/pebble/v2/cmd/pebble` in this module,
// with GOWORK=off) and runs on loopback against a real coordinator. It is a
// module of its own, outside go.work, so that no product module requires
// pebble or its dependencies; it has no code of its own.
package pebble
