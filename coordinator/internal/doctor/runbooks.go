package doctor

import "github.com/gridcity/gridcity/coordinator/internal/config"

// Subject is a target as runbooks' match sees it.
type Subject struct {
	ID, Kind, Engine string
	// Server is the server the target runs on; a server is its own.
	Server string
}

// RunbookMatches reports whether a runbook applies to a target: each key
// of its match (id, kind, engine, server) must equal the target's; a
// runbook without match applies to every target.
func RunbookMatches(rb config.Runbook, t Subject) bool {
	for k, v := range rb.Match {
		var got string
		switch k {
		case "id":
			got = t.ID
		case "kind":
			got = t.Kind
		case "engine":
			got = t.Engine
		case "server":
			got = t.Server
		default:
			return false
		}
		if got != v {
			return false
		}
	}
	return true
}

// matchingRunbooks names the runbooks that apply to a target.
func (s *session) matchingRunbooks(subj Subject) []string {
	var out []string
	for _, rb := range s.f.Config.Runbooks {
		if RunbookMatches(rb, subj) {
			out = append(out, rb.Name)
		}
	}
	return out
}
