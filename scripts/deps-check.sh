#!/usr/bin/env bash
# deps-check.sh BINARY=MODULE_DIR … — fails when a binary was not built with exactly the
# dependency versions its module declares: every module in its build info (go version -m) must
# be the module's own main module or in that module's build list (GOWORK=off go list -m all,
# run in MODULE_DIR), at the same version and with the same replacement. A binary built in the
# workspace links what the highest of all go.work modules asks for, and fails here.
#
#   scripts/deps-check.sh bin/gridcity=coordinator bin/gridcity-agent=agent   (make deps-check)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
[ $# -gt 0 ] || { echo "usage: scripts/deps-check.sh BINARY=MODULE_DIR …" >&2; exit 2; }

# Both sides as lines "PATH VERSION" or "PATH VERSION => REPLACEMENT VERSION", where a local
# replacement has no version ((devel) in the build info, none in go list).
fail=0
for arg; do
	bin=${arg%%=*} dir=${arg#*=}
	[ -f "$bin" ] || { echo "deps-check: $bin is missing: make build" >&2; exit 1; }
	[ -f "$dir/go.mod" ] || { echo "deps-check: $dir/go.mod is missing" >&2; exit 1; }
	module=$(cd "$dir" && GOWORK=off "$GO" list -m)
	want=$(cd "$dir" && GOWORK=off "$GO" list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}' all | sed 's/ *$//')
	got=$("$GO" version -m "$bin" | awk -F'\t' '
		$2 == "mod" { print "mod " $3 }
		$2 == "dep" { if (d != "") print d; d = $3 " " $4 }
		$2 == "=>"  { v = ($4 == "(devel)") ? "" : " " $4; d = d " => " $3 v }
		END         { if (d != "") print d }')
	mod=$(sed -n 's/^mod //p' <<<"$got")
	if [ "$mod" != "$module" ]; then
		echo "deps-check: $bin is $mod; want the main module of $dir, $module" >&2
		fail=1
	fi
	if ! awk -v bin="$bin" -v dir="$dir" '
		FNR == NR { want[$1] = $0; next }
		$1 == "mod" { next }
		{
			have = substr($0, length($1) + 2)
			if (!($1 in want)) {
				printf "deps-check: %s links %s %s, which is not in the build list of module %s (GOWORK=off go list -m all)\n", bin, $1, have, dir
				bad = 1
			} else if (want[$1] != $0) {
				printf "deps-check: %s links %s %s, but module %s declares %s (GOWORK=off go list -m all): make build builds it in %s with GOWORK=off\n", bin, $1, have, dir, substr(want[$1], length($1) + 2), dir
				bad = 1
			}
			n++
		}
		END { if (n == 0) { printf "deps-check: %s has no dependencies in its build info\n", bin; bad = 1 }; exit bad }
	' <(printf '%s\n' "$want") <(printf '%s\n' "$got") >&2; then
		fail=1
	fi
done
if [ "$fail" = 0 ]; then
	echo "deps-check: every binary links the versions its module declares ($*)"
fi
exit "$fail"
