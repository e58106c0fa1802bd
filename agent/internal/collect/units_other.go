//go:build !linux

package collect

var newUnitsCollector = newUnsupported
