package collect

import (
	"sort"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("failed_units", TierMedium, newUnitsCollector) }

// maxFailedUnits bounds the failed units reported; a host with more has a
// problem that the first few hundred already show.
const maxFailedUnits = 256

// unitStatus is what the D-Bus fetch learns about one unit: the fields of
// ListUnitsFiltered and two timestamps, in microseconds since the epoch.
type unitStatus struct {
	Name, Description, ActiveState, SubState string
	StateChangeUsec, InactiveEnterUsec       uint64
}

// failedUnits turns the fetched units into the section: only units in the
// failed state (a ListUnits fallback returns all), each once, sorted by
// name, strings cleaned. A unit's failure time is when its state last
// changed, or, on systemd versions without that property, when it entered
// inactive-or-failed.
func failedUnits(raw []unitStatus) *gridcityv1.Units {
	seen := map[string]bool{}
	u := &gridcityv1.Units{}
	for _, r := range raw {
		if r.ActiveState != "failed" || seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		since := r.StateChangeUsec
		if since == 0 {
			since = r.InactiveEnterUsec
		}
		u.Items = append(u.Items, &gridcityv1.Unit{
			Name:        clean(r.Name, maxName),
			Description: clean(r.Description, maxName),
			SinceUnix:   int64(since / 1e6),
			ActiveState: clean(r.ActiveState, maxName),
			SubState:    clean(r.SubState, maxName),
		})
	}
	sort.Slice(u.Items, func(i, j int) bool { return u.Items[i].Name < u.Items[j].Name })
	u.Items = u.Items[:min(len(u.Items), maxFailedUnits)]
	return u
}
