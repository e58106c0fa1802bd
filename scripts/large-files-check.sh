#!/usr/bin/env bash
# large-files-check.sh — fails when git tracks a file over 1 MiB that is not on the allow-list
# below: a built binary, a dump or a profile committed by mistake stays in every clone for good.
# Sizes are those of the staged blobs (git ls-files), so it also catches a file about to be
# committed. make large-files-check runs it (and make test).
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))

# allow: "PATH|why it must be tracked at that size", one per line. Empty today: the largest
# tracked files are bench/report.json and bench/report.md (under 200 KB) and the tour's
# screenshots under docs/tour/ (under 150 KB each).
allow=(
)

fail=0
while read -r size path; do
	[ "$size" -gt "$limit" ] || continue
	for a in "${allow[@]}"; do
		[ "${a%%|*}" = "$path" ] && continue 2
	done
	printf 'large-files-check: %s is tracked and %d bytes (%.1f MiB), over %d bytes: git rm --cached it and ignore it in .gitignore if it is built, or add it to the allow-list in scripts/large-files-check.sh with the reason it must be tracked\n' \
		"$path" "$size" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" "$limit" >&2
	fail=1
done < <(git -c core.quotePath=off ls-files -s | awk -F'\t' '{ split($1, f, " "); print f[2] " " $2 }' | git cat-file --batch-check='%(objectsize) %(rest)')
[ "$fail" = 0 ] && echo "large-files-check: no tracked file over $limit bytes but the allowed ones"
exit "$fail"
