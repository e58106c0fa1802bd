//go:build unix

package authlog

import "github.com/gridcity/gridcity/agent/internal/hostquery"

// defaultQuery runs journalctl; runner is the only package of the agent
// that starts processes.
var defaultQuery QueryFunc = hostquery.QueryLines
