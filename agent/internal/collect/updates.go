package collect

import (
	"bytes"
	"iter"
	"sort"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("updates", TierUpdates, newUpdatesCollector) }

const (
	// maxUpdatesOutput bounds what a package manager may print; a line per
	// package (two for apt) of ~150 bytes leaves room for 10 000 updates.
	maxUpdatesOutput = 4 << 20
	maxUpdatesLines  = 1 << 17
	// maxSecurityPackages bounds the names listed; the count goes on.
	maxSecurityPackages = 256
)

// pkgCounts is what a package manager says is pending.
type pkgCounts struct {
	pending, security uint32
	securityPkgs      []string
}

// nameSet gathers package names once each, bounded in how many it keeps.
type nameSet struct {
	seen  map[string]bool
	count uint32
	kept  []string
}

func (s *nameSet) add(name []byte) {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if s.seen[string(name)] {
		return
	}
	s.seen[string(name)] = true
	s.count++
	if len(s.kept) < maxSecurityPackages {
		s.kept = append(s.kept, cleanBytes(name, maxName))
	}
}

func (s *nameSet) sorted() []string {
	sort.Strings(s.kept)
	return s.kept
}

// parseApt reads `apt-get --just-print dist-upgrade`. Each upgrade is a
// line "Inst name [old] (new Origin:Version/suite, … [arch])"; a line
// without [old] installs a new package (a new kernel's), which apt does
// not count as upgraded, and neither do we. An upgrade is a security
// update when one of its origins is a security suite: "…-security"
// (Ubuntu, Debian 11 on) or the label "Debian-Security" (older Debian,
// whose suite was "buster/updates").
func parseApt(lines iter.Seq[[]byte]) pkgCounts {
	var all, sec nameSet
	var buf [4][]byte
	for line := range lines {
		if !bytes.HasPrefix(line, []byte("Inst ")) {
			continue
		}
		f := fields(line, buf[:0])
		if len(f) < 4 || !bytes.HasPrefix(f[2], []byte("[")) {
			continue
		}
		all.add(f[1])
		if aptSecurity(f[3]) {
			sec.add(f[1])
		}
	}
	return pkgCounts{pending: all.count, security: sec.count, securityPkgs: sec.sorted()}
}

// aptSecurity reports whether the "(new origins [arch])" part of an Inst
// line names a security suite.
func aptSecurity(rest []byte) bool {
	start, end := bytes.IndexByte(rest, '('), bytes.LastIndexByte(rest, ')')
	if start < 0 || end < start {
		return false
	}
	inside := rest[start+1 : end]
	if i := bytes.LastIndex(inside, []byte(" [")); i >= 0 {
		inside = inside[:i]
	}
	_, origins, _ := bytes.Cut(inside, []byte(" "))
	for origin := range bytes.SplitSeq(origins, []byte(",")) {
		label, rel, _ := bytes.Cut(bytes.TrimSpace(origin), []byte(":"))
		_, suite, _ := bytes.Cut(rel, []byte("/"))
		if bytes.Equal(label, []byte("Debian-Security")) || bytes.HasSuffix(suite, []byte("-security")) {
			return true
		}
	}
	return false
}

// parseDnfCheckUpdate counts the packages of `dnf -q check-update` (or
// yum's): lines "name.arch  version  repo", where a long name.arch wraps
// onto a line of its own; everything after "Obsoleting Packages" repeats
// packages already counted.
func parseDnfCheckUpdate(lines iter.Seq[[]byte]) uint32 {
	var all nameSet
	var wrapped []byte
	var buf [4][]byte
	for line := range lines {
		if bytes.HasPrefix(bytes.ToLower(bytes.TrimSpace(line)), []byte("obsoleting")) {
			break
		}
		f := fields(line, buf[:0])
		switch {
		case len(f) == 1 && isNameArch(f[0]):
			wrapped = append(wrapped[:0], f[0]...)
			continue
		case len(f) == 2 && wrapped != nil && startsWithDigit(f[0]):
			all.add(wrapped)
		case len(f) == 3 && isNameArch(f[0]) && startsWithDigit(f[1]):
			all.add(f[0])
		}
		wrapped = nil
	}
	return all.count
}

// parseDnfSecurity reads `dnf -q updateinfo list --security`: lines
// "ADVISORY Severity/Sec. nevra" (dnf 4, yum) or "ADVISORY security
// Severity nevra date time" (dnf 5), so the package is found by its shape,
// not its column. It returns the distinct package names.
func parseDnfSecurity(lines iter.Seq[[]byte]) (uint32, []string) {
	var sec nameSet
	var buf [8][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		for i := 2; i < len(f); i++ {
			if name, ok := nevraName(f[i]); ok {
				sec.add(name)
				break
			}
		}
	}
	return sec.count, sec.sorted()
}

// nevraName returns the name of "name-[epoch:]version-release.arch".
func nevraName(s []byte) ([]byte, bool) {
	dot := bytes.LastIndexByte(s, '.')
	if dot < 0 || !isArch(s[dot+1:]) {
		return nil, false
	}
	rest := s[:dot]
	r := bytes.LastIndexByte(rest, '-')
	if r <= 0 || r == len(rest)-1 {
		return nil, false
	}
	rest = rest[:r]
	v := bytes.LastIndexByte(rest, '-')
	if v <= 0 || !startsWithDigit(rest[v+1:]) {
		return nil, false
	}
	return rest[:v], true
}

// isNameArch reports whether s looks like "name.arch".
func isNameArch(s []byte) bool {
	dot := bytes.LastIndexByte(s, '.')
	return dot > 0 && isArch(s[dot+1:])
}

func isArch(s []byte) bool {
	if len(s) == 0 || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func startsWithDigit(s []byte) bool { return len(s) > 0 && s[0] >= '0' && s[0] <= '9' }

func updatesSection(manager string, c pkgCounts, now time.Time) *gridcityv1.Updates {
	return &gridcityv1.Updates{
		Pending:          c.pending,
		Security:         c.security,
		Manager:          manager,
		SecurityPackages: c.securityPkgs,
		CheckedUnix:      now.Unix(),
	}
}
