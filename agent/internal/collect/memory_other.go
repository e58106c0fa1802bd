//go:build !linux

package collect

var newMemoryCollector = newUnsupported
