package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxReported caps the problems an Error prints: past it the file is
// probably not a coordinator config at all.
const maxReported = 50

// Problem is one thing wrong with a config.
type Problem struct {
	File string // "" when the config did not come from a file
	Line int    // 0 when unknown
	Msg  string // what is wrong and what to do
}

func (p Problem) String() string {
	switch {
	case p.File != "" && p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	case p.File != "":
		return p.File + ": " + p.Msg
	case p.Line > 0:
		return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
	}
	return p.Msg
}

// Error is every problem found in a config, in file order, one a line.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == maxReported {
			fmt.Fprintf(&b, "\n… and %d more problems", len(e.Problems)-maxReported)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// sortProblems puts problems in file order; problems without a line come
// first, and problems on one line keep the order they were found in.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
}

// merge joins the problems of shape and of meaning. A line that already has
// a problem of shape keeps only that one: a value that could not be decoded
// would otherwise also be reported as missing.
func merge(shape, meaning *Error) error {
	if shape == nil && meaning == nil {
		return nil
	}
	var ps []Problem
	bad := map[int]bool{}
	if shape != nil {
		ps = append(ps, shape.Problems...)
		for _, p := range shape.Problems {
			bad[p.Line] = true
		}
	}
	if meaning != nil {
		for _, p := range meaning.Problems {
			if !bad[p.Line] || p.Line == 0 {
				ps = append(ps, p)
			}
		}
	}
	sortProblems(ps)
	return &Error{Problems: ps}
}

// asError turns an *Error that may be nil into an error that is nil then.
func asError(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}
