//go:build !linux

package collect

var newProcessesCollector = newUnsupported
