#!/usr/bin/env bash
# test-package.sh — builds the .deb packages twice (versions 0.0.1~test1 and 0.0.1~test2, for
# this machine's architecture) and installs, upgrades, removes and purges them with dpkg on this
# machine, checking files, owners, modes, conffiles, the systemd enablement and the gridcity
# user at each step; runs lintian on them (no errors allowed) and checks that the .rpm files
# are built (and their contents, where rpm is installed).
#
#   sudo bash deploy/test-package.sh
#
# It really installs into / (no systemd runs in CI; where it does, a policy-rc.d made for the
# test keeps dpkg from starting anything), so it refuses to run where gridcity is installed
# already: the gridcity or gridcity-agent package, /var/lib/gridcity, /var/lib/gridcity-agent
# or /etc/gridcity. It leaves the machine as it found it, also on failure: the packages are
# purged, and the gridcity user, /etc/gridcity and the policy-rc.d are removed if the test made
# them. The coordinator runs briefly on free loopback ports. Needs root (skipped otherwise),
# Go, dpkg and lintian (CI installs it; elsewhere the lintian check is skipped without it).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "test-package: SKIP: must run as root (it installs the packages with dpkg): sudo bash $0"
	exit 0
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

step() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
fail() {
	printf '\ntest-package: FAIL: %s\n' "$*" >&2
	exit 1
}
skip() {
	# In CI a skip would hide the test: there it fails.
	[ -z "${CI:-}" ] || fail "$*"
	echo "test-package: SKIP: $*"
	exit 0
}

command -v dpkg >/dev/null || skip "dpkg is not installed: this test is for Debian-like machines"
arch=$(dpkg --print-architecture)
case $arch in amd64 | arm64) ;; *) skip "packages are built for amd64 and arm64, and this machine is $arch" ;; esac
for p in gridcity gridcity-agent; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
		skip "the $p package is installed here (dpkg -l $p); this test installs and purges it"
	fi
done
for d in /var/lib/gridcity /var/lib/gridcity-agent /etc/gridcity; do
	[ ! -e "$d" ] || skip "$d exists: gridcity is installed here, and this test would purge it"
done

T=$(mktemp -d /tmp/gridcity-test-package.XXXXXX)
LOGS=$T/logs
mkdir -p "$LOGS"
user_existed=0
getent passwd gridcity >/dev/null && user_existed=1
group_existed=0
getent group gridcity >/dev/null && group_existed=1
policy=/usr/sbin/policy-rc.d
made_policy=0
pgid=""

cleanup() {
	rc=$?
	set +e
	if [ -n "$pgid" ]; then
		kill -TERM -- "-$pgid" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pgid" 2>/dev/null
	fi
	for p in gridcity-agent gridcity; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
			dpkg -P "$p" >>"$LOGS/cleanup.log" 2>&1 || dpkg --force-all -P "$p" >>"$LOGS/cleanup.log" 2>&1
		fi
	done
	# None of these existed before the test (it refuses to start otherwise).
	rm -rf /var/lib/gridcity /var/lib/gridcity-agent /etc/gridcity
	if [ "$user_existed" = 0 ] && getent passwd gridcity >/dev/null; then userdel gridcity; fi
	if [ "$group_existed" = 0 ] && getent group gridcity >/dev/null; then groupdel gridcity; fi
	if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
	if [ "$rc" -ne 0 ]; then
		for f in "$LOGS"/*.log; do
			[ -s "$f" ] || continue
			printf '\n--- %s (last 30 lines)\n' "$f" >&2
			tail -n 30 "$f" >&2
		done
	fi
	rm -rf "$T"
	if [ "$rc" -eq 0 ]; then echo "test-package: PASS"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mode_of() { stat -c %a "$1"; }
owner_of() { stat -c %U:%G "$1"; }
# assert_file PATH MODE OWNER:GROUP
assert_file() {
	[ -e "$1" ] || fail "$1 is missing"
	[ "$(mode_of "$1")" = "$2" ] || fail "$1 has mode $(mode_of "$1"), want $2"
	[ "$(owner_of "$1")" = "$3" ] || fail "$1 belongs to $(owner_of "$1"), want $3"
}
assert_gone() { for p in "$@"; do [ ! -e "$p" ] && [ ! -L "$p" ] || fail "$p is still there"; done; }
assert_grep() { grep -q -- "$1" "$2" || fail "$2 does not contain \"$1\""; }
# assert_link LINK TARGET: LINK leads to TARGET (deb-systemd-helper on bookworm links units
# through /lib, which merged /usr makes the same directory as /usr/lib).
assert_link() {
	[ -L "$1" ] || fail "$1 is not a link"
	[ "$(readlink -f "$1")" = "$(readlink -f "$2")" ] || fail "$1 links to \"$(readlink "$1")\", want $2"
}
status_of() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null || echo "not-installed"; }
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# sums DIR: a checksum of every file in DIR, to show that an upgrade left the state alone.
sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

A=0.0.1~test1 B=0.0.1~test2
step "build the packages, $A and $B, for $arch"
for v in $A $B; do
	deploy/package/build.sh --version "$v" --arch "$arch" --out "$T/$v" >"$LOGS/build-$v.log" 2>&1 || fail "deploy/package/build.sh --version $v failed"
	for f in "gridcity_${v}_$arch.deb" "gridcity-agent_${v}_$arch.deb"; do
		[ -f "$T/$v/$f" ] || fail "no $f: $(ls "$T/$v")"
	done
done
rpm_arch=$([ "$arch" = amd64 ] && echo x86_64 || echo aarch64)
for f in "gridcity-$A-1.$rpm_arch.rpm" "gridcity-agent-$A-1.$rpm_arch.rpm"; do
	[ -s "$T/$A/$f" ] || fail "no $f: $(ls "$T/$A")"
done
ok "$(cd "$T/$A" && ls | tr '\n' ' ')"

if command -v rpm >/dev/null; then
	step "the .rpm files' contents"
	rpm -qpl "$T/$A/gridcity-$A-1.$rpm_arch.rpm" >"$LOGS/rpm.log"
	rpm -qpl "$T/$A/gridcity-agent-$A-1.$rpm_arch.rpm" >>"$LOGS/rpm.log"
	for p in /usr/bin/gridcity /usr/lib/systemd/system/gridcity.service /etc/gridcity/coordinator.env \
		/usr/share/man/man1/gridcity.1.gz /usr/bin/gridcity-agent /usr/lib/systemd/system/gridcity-agent.path \
		/etc/gridcity/agent.yaml /usr/share/man/man1/gridcity-agent.1.gz; do
		grep -qx "$p" "$LOGS/rpm.log" || fail "the .rpm files do not hold $p"
	done
	ok "binaries, units, config files and manual pages are in the .rpm files"
else
	step "rpm is not installed: the .rpm files were built, their contents are not checked"
fi

step "lintian on the .deb files: no errors"
if command -v lintian >/dev/null; then
	lintian --fail-on error "$T/$A/gridcity_${A}_$arch.deb" "$T/$A/gridcity-agent_${A}_$arch.deb" >"$LOGS/lintian.log" 2>&1 ||
		{ cat "$LOGS/lintian.log"; fail "lintian found errors"; }
	sed 's/^/   /' "$LOGS/lintian.log"
	ok "no errors"
else
	[ -z "${CI:-}" ] || fail "lintian is not installed (CI installs it: .ci/run)"
	echo "   lintian is not installed: skipped (apt-get install lintian)"
fi

if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# made by gridcity deploy/test-package.sh: no service starts\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	made_policy=1
fi

step "dpkg -i $A"
dpkg -i "$T/$A/gridcity_${A}_$arch.deb" "$T/$A/gridcity-agent_${A}_$arch.deb" </dev/null >"$LOGS/install.log" 2>&1 ||
	{ cat "$LOGS/install.log"; fail "dpkg -i $A failed"; }
cat "$LOGS/install.log"
assert_grep "sudo -u gridcity gridcity join --data /var/lib/gridcity" "$LOGS/install.log"
assert_grep "sudo gridcity-agent enroll --join" "$LOGS/install.log"
assert_file /usr/bin/gridcity 755 root:root
assert_file /usr/bin/gridcity-agent 755 root:root
[ "$(/usr/bin/gridcity version)" = "gridcity $A" ] || fail "gridcity version says \"$(/usr/bin/gridcity version)\", want gridcity $A"
[ "$(/usr/bin/gridcity-agent version)" = "gridcity-agent $A" ] || fail "gridcity-agent version says \"$(/usr/bin/gridcity-agent version)\""
ok "binaries in /usr/bin, root's, 0755, version $A"

M=/usr/share/man/man1
if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/*; then
	ok "dpkg is told to leave out /usr/share/man here (a minimal image): the manual pages are not checked"
else
	assert_file "$M/gridcity.1.gz" 644 root:root
	assert_file "$M/gridcity-agent.1.gz" 644 root:root
	# The pages are docs/man's, compressed; man finds them by name where man-db is installed.
	zcat "$M/gridcity.1.gz" | cmp -s - docs/man/gridcity.1 || fail "$M/gridcity.1.gz is not docs/man/gridcity.1"
	zcat "$M/gridcity-agent.1.gz" | cmp -s - docs/man/gridcity-agent.1 || fail "$M/gridcity-agent.1.gz is not docs/man/gridcity-agent.1"
	if command -v man >/dev/null; then
		MANPAGER=cat man gridcity >"$LOGS/man.log" 2>&1 && grep -q -- "--advertise" "$LOGS/man.log" || { cat "$LOGS/man.log"; fail "man gridcity does not show the page"; }
		MANPAGER=cat man gridcity-agent >"$LOGS/man.log" 2>&1 && grep -q -- "--join" "$LOGS/man.log" || { cat "$LOGS/man.log"; fail "man gridcity-agent does not show the page"; }
		ok "man gridcity and man gridcity-agent show the pages"
	else
		ok "the manual pages are in $M (man is not installed: not shown)"
	fi
fi

getent passwd gridcity >"$LOGS/user.log" || fail "no gridcity user"
IFS=: read -r _ _ uid gid _ home shell <"$LOGS/user.log"
[ "$uid" -lt 1000 ] || fail "gridcity has uid $uid: not a system user"
[ "$home" = /var/lib/gridcity ] || fail "gridcity's home is $home"
[ "$shell" = /usr/sbin/nologin ] || fail "gridcity's shell is $shell"
[ "$(getent group gridcity | cut -d: -f3)" = "$gid" ] || fail "gridcity's primary group is not the gridcity group"
ok "system user gridcity (uid $uid), home /var/lib/gridcity, shell /usr/sbin/nologin"

assert_file /var/lib/gridcity 700 gridcity:gridcity
assert_file /var/lib/gridcity-agent 700 root:root
assert_file /etc/gridcity 755 root:root
assert_file /etc/gridcity/coordinator.env 600 root:root
assert_file /etc/gridcity/agent.env 600 root:root
assert_file /etc/gridcity/agent.yaml 644 root:root
ok "/var/lib/gridcity gridcity's 0700, /var/lib/gridcity-agent root's 0700, coordinator.env and agent.env 0600, agent.yaml 0644"

conffiles() { dpkg-query -W -f='${Conffiles}\n' "$1" | awk 'NF { print $1 }' | sort | tr '\n' ' '; }
[ "$(conffiles gridcity)" = "/etc/gridcity/coordinator.env " ] || fail "gridcity's conffiles: $(conffiles gridcity)"
[ "$(conffiles gridcity-agent)" = "/etc/gridcity/agent.env /etc/gridcity/agent.yaml " ] || fail "gridcity-agent's conffiles: $(conffiles gridcity-agent)"
ok "conffiles: $(conffiles gridcity)$(conffiles gridcity-agent)"

U=/usr/lib/systemd/system
for unit in gridcity.service gridcity-agent.service; do
	# The packaged unit is deploy/systemd's with /usr/bin, under a comment of three lines.
	tail -n +4 "$U/$unit" | diff -u <(sed '/^#/!s|/usr/local/bin/|/usr/bin/|g' "deploy/systemd/$unit") - >"$LOGS/unit-diff.log" ||
		{ cat "$LOGS/unit-diff.log"; fail "$U/$unit is not deploy/systemd/$unit with /usr/bin"; }
done
assert_grep "^ExecStart=/usr/bin/gridcity serve --data /var/lib/gridcity$" "$U/gridcity.service"
assert_grep "^ExecStart=/usr/bin/gridcity-agent run " "$U/gridcity-agent.service"
assert_grep "^ConditionPathExists=/var/lib/gridcity-agent/identity.json$" "$U/gridcity-agent.service"
assert_grep "^PathChanged=/var/lib/gridcity-agent/identity.json$" "$U/gridcity-agent.path"
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify "$U/gridcity.service" "$U/gridcity-agent.service" "$U/gridcity-agent.path" >"$LOGS/verify.log" 2>&1 ||
		{ cat "$LOGS/verify.log"; fail "systemd-analyze verify failed"; }
	[ ! -s "$LOGS/verify.log" ] || { cat "$LOGS/verify.log"; fail "systemd-analyze verify complained"; }
	ok "the units are deploy/systemd's with /usr/bin; systemd-analyze verify: no complaints"
else
	ok "the units are deploy/systemd's with /usr/bin"
fi
W=/etc/systemd/system
assert_link "$W/multi-user.target.wants/gridcity.service" "$U/gridcity.service"
assert_link "$W/multi-user.target.wants/gridcity-agent.service" "$U/gridcity-agent.service"
assert_link "$W/paths.target.wants/gridcity-agent.path" "$U/gridcity-agent.path"
ok "enabled: gridcity.service, gridcity-agent.service and gridcity-agent.path"

step "state: the installed coordinator makes its store; the installed agent enrolls with its packaged config"
HP=14700 GP=14701
for _ in $(seq 1 20); do
	if port_free "$HP" && port_free "$GP"; then break; fi
	HP=$((HP + 10)) GP=$((GP + 10))
done
setsid runuser -u gridcity -- /usr/bin/gridcity serve --data /var/lib/gridcity \
	--http "127.0.0.1:$HP" --grpc "127.0.0.1:$GP" --advertise "127.0.0.1:$GP" >"$LOGS/coordinator.log" 2>&1 </dev/null &
pgid=$!
for _ in $(seq 1 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$HP") 2>/dev/null && break
	kill -0 "$pgid" 2>/dev/null || fail "the coordinator exited"
	sleep 0.1
done
line=$(runuser -u gridcity -- /usr/bin/gridcity join --data /var/lib/gridcity --json | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
case $line in "gridcity://127.0.0.1:$GP/"*) ;; *) fail "gridcity join gave no join line" ;; esac
/usr/bin/gridcity-agent enroll --join "$line" --name test-package-agent >"$LOGS/enroll.log" 2>&1 || fail "gridcity-agent enroll failed"
assert_file /var/lib/gridcity-agent/identity.json 600 root:root
assert_grep '"name": "test-package-agent"' /var/lib/gridcity-agent/identity.json
kill -TERM -- "-$pgid"
for _ in $(seq 1 100); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
pgid=""
stray=$(find /var/lib/gridcity ! -user gridcity -print)
[ -z "$stray" ] || fail "files in /var/lib/gridcity not owned by gridcity: $stray"
data_sum=$(sums /var/lib/gridcity)
[ -n "$data_sum" ] || fail "the coordinator left no files in /var/lib/gridcity"
agent_sum=$(sums /var/lib/gridcity-agent)
ok "$(printf '%s\n' "$data_sum" | wc -l) files in /var/lib/gridcity, all gridcity's; the agent enrolled into /var/lib/gridcity-agent"

# Local edits to the conffiles, which an upgrade must keep.
echo "GRIDCITY_LOG_LEVEL=debug" >>/etc/gridcity/coordinator.env
sed -i 's/^# district: .*/district: test-package/' /etc/gridcity/agent.yaml
assert_grep "^district: test-package" /etc/gridcity/agent.yaml
conf_sum=$(cat /etc/gridcity/coordinator.env /etc/gridcity/agent.yaml /etc/gridcity/agent.env | cksum)

step "dpkg -i $B: an upgrade"
dpkg -i "$T/$B/gridcity_${B}_$arch.deb" "$T/$B/gridcity-agent_${B}_$arch.deb" </dev/null >"$LOGS/upgrade.log" 2>&1 ||
	{ cat "$LOGS/upgrade.log"; fail "dpkg -i $B failed"; }
cat "$LOGS/upgrade.log"
[ "$(/usr/bin/gridcity version)" = "gridcity $B" ] || fail "after the upgrade, gridcity version says \"$(/usr/bin/gridcity version)\""
[ "$(/usr/bin/gridcity-agent version)" = "gridcity-agent $B" ] || fail "after the upgrade, gridcity-agent version says \"$(/usr/bin/gridcity-agent version)\""
! grep -q "not enrolled yet" "$LOGS/upgrade.log" || fail "the upgrade of an enrolled agent said it is not enrolled"
[ "$(sums /var/lib/gridcity)" = "$data_sum" ] || fail "the upgrade changed /var/lib/gridcity"
[ "$(sums /var/lib/gridcity-agent)" = "$agent_sum" ] || fail "the upgrade changed /var/lib/gridcity-agent"
[ "$(cat /etc/gridcity/coordinator.env /etc/gridcity/agent.yaml /etc/gridcity/agent.env | cksum)" = "$conf_sum" ] || fail "the upgrade changed the edited conffiles"
assert_file /var/lib/gridcity 700 gridcity:gridcity
assert_file /var/lib/gridcity-agent 700 root:root
assert_file /etc/gridcity/coordinator.env 600 root:root
assert_link "$W/multi-user.target.wants/gridcity.service" "$U/gridcity.service"
assert_link "$W/paths.target.wants/gridcity-agent.path" "$U/gridcity-agent.path"
[ "$uid" = "$(id -u gridcity)" ] || fail "the upgrade changed gridcity's uid"
ok "binaries at $B; state, identity, edited conffiles, modes, the user and the enablement kept"

step "dpkg -r: programs gone, data and settings kept"
dpkg -r gridcity-agent gridcity </dev/null >"$LOGS/remove.log" 2>&1 || { cat "$LOGS/remove.log"; fail "dpkg -r failed"; }
assert_gone /usr/bin/gridcity /usr/bin/gridcity-agent "$U/gridcity.service" "$U/gridcity-agent.service" "$U/gridcity-agent.path" \
	"$M/gridcity.1.gz" "$M/gridcity-agent.1.gz"
[ "$(status_of gridcity)" = "deinstall ok config-files" ] || fail "gridcity's status after dpkg -r: $(status_of gridcity)"
[ "$(status_of gridcity-agent)" = "deinstall ok config-files" ] || fail "gridcity-agent's status after dpkg -r: $(status_of gridcity-agent)"
[ "$(sums /var/lib/gridcity)" = "$data_sum" ] || fail "dpkg -r changed /var/lib/gridcity"
[ "$(sums /var/lib/gridcity-agent)" = "$agent_sum" ] || fail "dpkg -r changed /var/lib/gridcity-agent"
[ "$(cat /etc/gridcity/coordinator.env /etc/gridcity/agent.yaml /etc/gridcity/agent.env | cksum)" = "$conf_sum" ] || fail "dpkg -r changed the conffiles"
# A removed service whose enablement is left for a reinstall is masked, so nothing starts it.
assert_link "$W/gridcity.service" /dev/null
assert_link "$W/gridcity-agent.service" /dev/null
ok "status config-files; /var/lib/gridcity, the identity and the conffiles kept; the units masked"

step "dpkg -i $B again, onto the kept data"
dpkg -i "$T/$B/gridcity_${B}_$arch.deb" "$T/$B/gridcity-agent_${B}_$arch.deb" </dev/null >"$LOGS/reinstall.log" 2>&1 ||
	{ cat "$LOGS/reinstall.log"; fail "reinstalling $B failed"; }
assert_gone "$W/gridcity.service" "$W/gridcity-agent.service"
assert_link "$W/multi-user.target.wants/gridcity.service" "$U/gridcity.service"
[ "$(sums /var/lib/gridcity)" = "$data_sum" ] || fail "reinstalling changed /var/lib/gridcity"
! grep -q "not enrolled yet" "$LOGS/reinstall.log" || fail "the reinstalled agent said it is not enrolled"
ok "unmasked and enabled again; the data is the same"

step "dpkg -P: data, settings and enablement gone; the user stays"
dpkg -P gridcity-agent gridcity </dev/null >"$LOGS/purge.log" 2>&1 || { cat "$LOGS/purge.log"; fail "dpkg -P failed"; }
for p in gridcity gridcity-agent; do
	case $(status_of "$p") in *not-installed) ;; *) fail "$p after dpkg -P: $(status_of "$p")" ;; esac
done
assert_gone /var/lib/gridcity /var/lib/gridcity-agent /etc/gridcity \
	"$W/multi-user.target.wants/gridcity.service" "$W/multi-user.target.wants/gridcity-agent.service" \
	"$W/paths.target.wants/gridcity-agent.path" "$W/gridcity.service" "$W/gridcity-agent.service"
left=$(find /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked -name 'gridcity*' 2>/dev/null || true)
[ -z "$left" ] || fail "deb-systemd-helper's state is left: $left"
getent passwd gridcity >/dev/null || fail "the purge removed the gridcity user (Debian keeps system users)"
ok "/var/lib/gridcity, /var/lib/gridcity-agent, /etc/gridcity and the enablement gone; the gridcity user kept"
