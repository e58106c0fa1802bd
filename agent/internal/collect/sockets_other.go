//go:build !linux

package collect

var newSocketsCollector = newUnsupported
