//go:build !linux

package collect

var newCPUCollector = newUnsupported
