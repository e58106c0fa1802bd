//go:build !unix

package authlog

// defaultQuery is nil where the agent runs no processes: no journal.
var defaultQuery QueryFunc
