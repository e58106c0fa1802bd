package fleetview

import (
	"encoding/json"
	"fmt"
	"slices"
)

// The answer budget, in characters of JSON (docs/tour.md, "Rules every answer keeps"): a
// tool called without arguments (or with only its required ones) answers
// within AnswerBudget in each of its text and structured content, and
// within ArgsBudget with any. A list that would not fit is cut short, and
// the answer counts what it left out and names the argument that gets it.
// Lists are cut by their encoded size, not by a count of items: a reason or
// a name from the fleet can be long.
const (
	AnswerBudget = 16000
	ArgsBudget   = 48000
)

// BudgetFor is the budget of an answer: ArgsBudget when the call narrowed
// or paged it, AnswerBudget for the plain call.
func BudgetFor(withArgs bool) int {
	if withArgs {
		return ArgsBudget
	}
	return AnswerBudget
}

// fitting returns how many of items, from the first, fit in budget
// characters of JSON with the commas between them; it encodes no more
// items than that (and one).
func Fitting[T any](items []T, budget int) int {
	used := 0
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return i
		}
		used += len(b) + 1
		if used > budget {
			return i
		}
	}
	return len(items)
}

// JSONSize is the size of v's JSON in bytes (at least its characters).
func JSONSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// afterKey returns the position in keys just past after: 0 when after is
// empty, an error naming what to do when after is not one of keys (the
// list changed since the cursor was handed out, or it was mistyped).
func afterKey(keys []string, after, what string) (int, error) {
	if after == "" {
		return 0, nil
	}
	i := slices.Index(keys, after)
	if i < 0 {
		return 0, fmt.Errorf("after %q is not one of the %s listed now (it changed since, or the value was mistyped): call again without after to start from the first", after, what)
	}
	return i + 1, nil
}

// orEmptyOf is orEmpty for any list: [] rather than null for none.
func orEmptyOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// fill makes the views of src, from the first, while their JSON fits in
// budget characters, and stops there: a list of thousands costs only the
// views that are sent.
func fill[S, T any](src []S, view func(S) T, budget int) []T {
	out := []T{}
	used := 0
	for _, s := range src {
		v := view(s)
		used += JSONSize(v) + 1
		if used > budget {
			break
		}
		out = append(out, v)
	}
	return out
}

// first ranks what is true before what is not, for sorting.
func first(b bool) int {
	if b {
		return 0
	}
	return 1
}
