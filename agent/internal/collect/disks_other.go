//go:build !linux

package collect

var newDisksCollector = newUnsupported
