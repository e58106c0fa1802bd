#!/usr/bin/env bash
# build.sh — the .deb and .rpm packages of gridcity (the coordinator) and gridcity-agent, with
# nfpm at a pinned version (installed with `go install`, so only Go is needed).
#
#   deploy/package/build.sh [--version VERSION] [--arch "amd64 arm64"] [--out DIR]
#
# `make package` runs it (VERSION=… and ARCHS=… pass through). Writes, for each architecture:
#   DIR/gridcity_VERSION_ARCH.deb        DIR/gridcity-VERSION-1.RPMARCH.rpm
#   DIR/gridcity-agent_VERSION_ARCH.deb  DIR/gridcity-agent-VERSION-1.RPMARCH.rpm
# (RPMARCH: x86_64 for amd64, aarch64 for arm64). Without --version the version comes from
# git: 0~gitYYYYMMDDHHMMSS.HASH without a tag (it sorts before any release), X.Y.Z on a tag
# vX.Y.Z, X.Y.Z+gitYYYYMMDDHHMMSS.HASH after it, with .dirty for uncommitted changes. The
# binaries are built with the same version (`gridcity version`).
#
# The packaged units are made here from deploy/systemd/ (the installers' units), with the
# binaries in /usr/bin instead of /usr/local/bin, so the two never drift apart.
set -euo pipefail

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0
MAINTAINER="gridcity maintainers <maintainers@users.noreply.a-seed-4dc12c26.example>"

prog=package
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "$prog" "$*"; }

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
GO=${GO:-go}

version="" archs="amd64 arm64" out=dist
while [ $# -gt 0 ]; do
	case $1 in
	--version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
	--arch) [ $# -ge 2 ] || die "--arch needs a value"; archs=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

# git_version: the package version of this checkout (see the top of this file).
git_version() {
	local hash when tag dirty=""
	hash=$(git rev-parse --short=7 HEAD) || die "not a git checkout: give --version (make package VERSION=1.2.3)"
	when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
	git update-index -q --refresh >/dev/null 2>&1 || true
	git diff-index --quiet HEAD -- || dirty=.dirty
	tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)
	if [ -z "$tag" ]; then
		echo "0~git$when.$hash$dirty"
	elif [ "$(git rev-list -n 1 "$tag")" = "$(git rev-parse HEAD)" ] && [ -z "$dirty" ]; then
		echo "${tag#v}"
	else
		echo "${tag#v}+git$when.$hash$dirty"
	fi
}
[ -n "$version" ] || version=$(git_version)
# One version for dpkg and rpm: no '-' (that would start a Debian revision; rpm refuses it).
case $version in
[0-9]*) ;;
*) die "version $version: it must start with a digit (e.g. 0.2.0, 0.2.0~rc1, 0.2.0+git20261204.f3b14d6)" ;;
esac
case $version in *[!A-Za-z0-9.+~]*) die "version $version: use letters, digits and . + ~ only (no -)" ;; esac
for a in $archs; do
	case $a in amd64 | arm64) ;; *) die "architecture $a: amd64 or arm64" ;; esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/bin"

# Reproducible: file times in the packages are the commit's, not the build's.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH

say "nfpm (${NFPM#*@})"
GOBIN=$work/bin GOFLAGS= "$GO" install "$NFPM" || die "cannot build nfpm ($NFPM): is the Go module proxy reachable?"

# The units. A sed that no longer matches (the source unit changed) must fail the build, not
# ship a unit that starts /usr/local/bin/….
mkdir -p "$work/systemd"
for unit in gridcity.service gridcity-agent.service; do
	{
		printf '# Installed by the %s package from deploy/systemd/%s, with the binary in /usr/bin.\n' "${unit%.service}" "$unit"
		printf '# An upgrade replaces this file: change the unit with `systemctl edit %s`.\n#\n' "${unit%.service}"
		sed -e '/^#/!s|/usr/local/bin/|/usr/bin/|g' "deploy/systemd/$unit"
	} >"$work/systemd/$unit"
	grep -q "^ExecStart=/usr/bin/${unit%.service} " "$work/systemd/$unit" || die "$unit: no ExecStart=/usr/bin/${unit%.service} after rewriting deploy/systemd/$unit"
	! grep -v '^#' "$work/systemd/$unit" | grep -q /usr/local || die "$unit: /usr/local is left in the packaged unit"
done

# The Debian changelog, one entry for this build (lintian wants one matching the version).
changelog_date=$(LC_ALL=C date -u -d "@$SOURCE_DATE_EPOCH" -R)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for pkg in gridcity gridcity-agent; do
	printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s of the gridcity repository.\n\n -- %s  %s\n' \
		"$pkg" "$version" "$commit" "$MAINTAINER" "$changelog_date" | gzip -9n >"$work/$pkg.changelog.gz"
done

# The manual pages, generated from the commands' flags into docs/man (TestManPage in each
# command's package fails when they drift), compressed as Debian policy wants.
for page in gridcity.1 gridcity-agent.1; do
	gzip -9n <"docs/man/$page" >"$work/$page.gz"
done

export GRIDCITY_PKG_VERSION=$version GRIDCITY_PKG_MAINTAINER=$MAINTAINER
for arch in $archs; do
	export GRIDCITY_ARCH=$arch GRIDCITY_PKG_WORK=$work/$arch
	mkdir -p "$GRIDCITY_PKG_WORK"
	# The Makefile's own build, so that the flags (static, trimmed, the version) are the same.
	say "building the binaries for linux/$arch, version $version"
	GOOS=linux GOARCH=$arch make --no-print-directory -s build BIN="$GRIDCITY_PKG_WORK" VERSION="$version" >/dev/null
	scripts/deps-check.sh "$GRIDCITY_PKG_WORK/gridcity=coordinator" "$GRIDCITY_PKG_WORK/gridcity-agent=agent" >/dev/null ||
		die "the binaries for linux/$arch do not link the versions their modules declare"
	# Copies, not links: nfpm would package a link as a link.
	cp -r "$work/systemd" "$work"/*.changelog.gz "$work"/*.1.gz "$GRIDCITY_PKG_WORK/"
	for pkg in gridcity gridcity-agent; do
		for packager in deb rpm; do
			"$work/bin/nfpm" pkg --config "deploy/package/$pkg.yaml" --packager "$packager" --target "$out/" >"$work/nfpm.log" 2>&1 ||
				{ cat "$work/nfpm.log" >&2; die "nfpm failed for the $packager of $pkg ($arch)"; }
			say "$(sed -n 's/.*created package: *//p' "$work/nfpm.log" | tail -n 1)"
		done
	done
done
