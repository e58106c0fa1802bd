//go:build !linux

package collect

var newDefensesCollector = newUnsupported
