#!/usr/bin/env bash
# make demo, demo-break, demo-fix, demo-status, demo-down: check for root, build what the demo
# runs (make demo only), then hand over to bin/gridcity-fleet, which does the work.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-up}
shift || true
target="make demo"
[ "$cmd" = up ] || target="make demo-$cmd"

if [ "$(id -u)" -ne 0 ]; then
	if [ "$cmd" = up ]; then
		echo "make demo needs root for network namespaces: run sudo make demo" >&2
	else
		echo "$target needs root (the demo's network namespaces are root's): run sudo $target" >&2
	fi
	exit 1
fi

if [ "$cmd" = up ]; then
	if command -v "${GO:-go}" >/dev/null; then
		echo "Building bin/gridcity, bin/gridcity-agent and bin/gridcity-fleet …"
		out=$("${MAKE:-make}" --no-print-directory demo-build 2>&1) || { echo "$out" >&2; echo "make demo: the build failed" >&2; exit 1; }
	elif [ -x bin/gridcity ] && [ -x bin/gridcity-agent ] && [ -x bin/gridcity-fleet ]; then
		echo "make demo: go is not on root's PATH; running the binaries in bin/ as they are" >&2
	else
		echo "make demo: go is not on root's PATH (sudo resets it). Run: sudo env PATH=\"\$PATH\" make demo" >&2
		echo "           or build first as yourself (make build demo-build), then sudo make demo" >&2
		exit 1
	fi
elif [ ! -x bin/gridcity-fleet ]; then
	echo "$target: bin/gridcity-fleet is missing; start the demo first: sudo make demo" >&2
	exit 1
fi
exec bin/gridcity-fleet "$cmd" "$@"
