//go:build !linux

package collect

var newUpdatesCollector = newUnsupported
