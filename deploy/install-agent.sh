#!/usr/bin/env bash
# install-agent.sh — install the gridcity agent on this server, enroll it with a coordinator
# and run it under systemd.
#
#   sudo deploy/install-agent.sh "JOIN LINE" [--name NAME] [--binary PATH] [--no-start] [--reenroll]
#
# The join line comes from `gridcity join` on the coordinator. The agent enrolls before anything
# is installed, so a bad or expired join line fails here, with the agent's own message, and
# leaves this server as it was. Re-running is safe: an agent already enrolled with that
# coordinator keeps its identity; a changed binary or unit is replaced and the agent restarted.
#
# Paths (override for packaging or tests; the unit is rewritten to match):
#   GRIDCITY_PREFIX    /usr/local/bin            the binary
#   GRIDCITY_ETC       /etc/gridcity             agent.yaml (written with defaults if absent)
#   GRIDCITY_STATE     /var/lib/gridcity-agent   identity.json (0600) and the agent's journal
#   GRIDCITY_UNIT_DIR  /etc/systemd/system       gridcity-agent.service
set -euo pipefail

prog=install-agent
say() { printf '%s: %s\n' "$prog" "$*"; }
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }

usage() {
	cat <<'EOF'
Usage: install-agent.sh "JOIN LINE" [--name NAME] [--binary PATH] [--no-start] [--reenroll]

Installs gridcity-agent, enrolls it with the coordinator named in the join line (printed by
`gridcity join` on the coordinator), writes /etc/gridcity/agent.yaml if it is missing, and
enables and starts gridcity-agent.service when systemd runs this machine.

  --name NAME     this server's name in the fleet (default: agent.yaml's name, else the host name)
  --binary PATH   the gridcity-agent binary to install
                  (default: ./bin/gridcity-agent, else bin/ next to this deploy/ folder)
  --no-start      install and enable, but do not start now
  --reenroll      enroll with this (new) join line even though an identity exists, e.g. after
                  `gridcity agents revoke`; the old identity is replaced only on success

Once enrolled, the join line may be left out to upgrade the binary or the unit.
Environment: GRIDCITY_PREFIX, GRIDCITY_ETC, GRIDCITY_STATE, GRIDCITY_UNIT_DIR (see the script).
EOF
}

# Root first: everything below writes system paths.
if [ "$(id -u)" -ne 0 ]; then
	die "must run as root: it installs a binary and a systemd unit and enrolls the agent in /var/lib (try: sudo $0 \"JOIN LINE\")"
fi

line="" name="" binary="" start=1 reenroll=0
while [ $# -gt 0 ]; do
	case $1 in
	--name) [ $# -ge 2 ] || die "--name needs a value"; name=$2; shift 2 ;;
	--name=*) name=${1#*=}; shift ;;
	--binary) [ $# -ge 2 ] || die "--binary needs a path"; binary=$2; shift 2 ;;
	--binary=*) binary=${1#*=}; shift ;;
	--no-start) start=0; shift ;;
	--reenroll) reenroll=1; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*)
		[ -z "$line" ] || die "one join line only; unexpected second argument \"$1\" (quote the join line)"
		line=$1; shift ;;
	esac
done

PREFIX=${GRIDCITY_PREFIX:-/usr/local/bin}
ETC=${GRIDCITY_ETC:-/etc/gridcity}
STATE=${GRIDCITY_STATE:-/var/lib/gridcity-agent}
UNIT_DIR=${GRIDCITY_UNIT_DIR:-/etc/systemd/system}
for v in PREFIX ETC STATE UNIT_DIR; do
	p=${!v}
	case $p in /*) ;; *) die "GRIDCITY_$v=$p: give an absolute path" ;; esac
	case $p in *[!A-Za-z0-9/._+-]*) die "GRIDCITY_$v=$p: use only letters, digits and / . _ + - (the path goes into a systemd unit)" ;; esac
done
if [ -n "$name" ]; then
	case $name in *[!A-Za-z0-9._-]*) die "--name $name: use letters, digits, dots, dashes and underscores" ;; esac
fi

HERE=$(cd "$(dirname "$0")" && pwd)
UNIT_SRC=$HERE/systemd/gridcity-agent.service
[ -f "$UNIT_SRC" ] || die "missing $UNIT_SRC: run this script from the gridcity deploy/ folder, with its systemd/ folder beside it"

if [ -z "$binary" ]; then
	for c in ./bin/gridcity-agent "$HERE/../bin/gridcity-agent" "$HERE/gridcity-agent"; do
		if [ -f "$c" ]; then binary=$c; break; fi
	done
	[ -n "$binary" ] || die "no gridcity-agent binary in ./bin or $HERE/../bin: build one with \`make build\`, or pass --binary PATH"
fi
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then die "--binary $binary is not an executable file"; fi
version=$("$binary" version 2>&1) || die "$binary does not run on this machine: $version"

CONFIG=$ETC/agent.yaml
IDENTITY=$STATE/identity.json
if [ -z "$line" ] && [ ! -f "$IDENTITY" ]; then
	usage >&2
	die "give the join line printed by \`gridcity join\` on the coordinator (this agent is not enrolled yet: no $IDENTITY)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-install-agent.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The config the agent enrolls and runs with. An existing file is the operator's and is never
# rewritten; a new one is prepared in $tmp and installed only after enrollment succeeded.
if [ -f "$CONFIG" ]; then
	config=$CONFIG new_config=0
	cfg_name=$(sed -n "s/^name:[[:space:]]*['\"]\{0,1\}\([^'\"#[:space:]]*\).*/\1/p" "$CONFIG" | head -n 1)
	if [ -n "$name" ] && [ -n "$cfg_name" ] && [ "$cfg_name" != "$name" ]; then
		say "note: $CONFIG says name: $cfg_name, and --name $name wins for enrollment; edit the file to match"
	fi
else
	config=$tmp/agent.yaml new_config=1
	cfg_name=${name:-$(uname -n)}
	cat >"$config" <<EOF
# gridcity agent configuration (see docs/configuration.md, "Agent config").
# Written by install-agent.sh; edit it and run: systemctl restart gridcity-agent
name: "$cfg_name"
# district: my-product          # optional: groups this server with others
runAs: root                     # the user approved commands run as
commands: true                  # false: this agent never runs a command, whatever is approved
authLogs: [/var/log/auth.log, /var/log/secure]
EOF
fi

# Enroll (or confirm the enrollment) before touching anything else. The agent writes
# identity.json only when enrollment succeeds.
before=""
[ ! -f "$IDENTITY" ] || before=$(cksum <"$IDENTITY")
enroll_state=$STATE
if [ "$reenroll" = 1 ] && [ -f "$IDENTITY" ]; then
	# The agent keeps an identity for the same coordinator even when handed a new join line,
	# so enroll into an empty directory beside the state directory (the same file system, for
	# an atomic rename) and move the new identity in only when enrollment succeeded.
	[ -n "$line" ] || die "--reenroll needs a new join line from \`gridcity join\`"
	enroll_state=$(mktemp -d "$(dirname "$STATE")/.gridcity-agent-enroll.XXXXXX")
	trap 'rm -rf "$tmp" "$enroll_state"' EXIT
fi
args=(enroll --state "$enroll_state" --config "$config")
[ -z "$line" ] || args+=(--join "$line")
[ -z "$name" ] || args+=(--name "$name")
# GRIDCITY_STATE and the other path settings are this script's, not the agent's (it reads
# GRIDCITY_AGENT_<FLAG>, and would warn that GRIDCITY_STATE is ignored).
if ! env -u GRIDCITY_PREFIX -u GRIDCITY_ETC -u GRIDCITY_STATE -u GRIDCITY_UNIT_DIR "$binary" "${args[@]}"; then
	if [ -f "$IDENTITY" ]; then
		die "gridcity-agent enroll failed (its message is above); the existing installation was left as it was"
	fi
	die "gridcity-agent enroll failed (its message is above); nothing was installed"
fi
if [ "$enroll_state" != "$STATE" ]; then
	[ -f "$enroll_state/identity.json" ] || die "the agent reported success but wrote no identity"
	chmod 0600 "$enroll_state/identity.json"
	mv -f "$enroll_state/identity.json" "$IDENTITY"
	say "replaced the previous identity in $IDENTITY"
fi
[ -f "$IDENTITY" ] || die "the agent reported success but wrote no $IDENTITY"
chmod 0700 "$STATE"
chmod 0600 "$IDENTITY"
after=$(cksum <"$IDENTITY")
enrolled_as=$(sed -n 's/^[[:space:]]*"name":[[:space:]]*"\([^"]*\)".*/\1/p' "$IDENTITY" | head -n 1)
coordinator=$(sed -n 's/^[[:space:]]*"coordinator":[[:space:]]*"\([^"]*\)".*/\1/p' "$IDENTITY" | head -n 1)
changed=0
[ "$before" = "$after" ] || changed=1

# install_file SRC DEST MODE: replace DEST atomically when its content differs.
install_file() {
	if [ -f "$2" ] && cmp -s "$1" "$2" 2>/dev/null; then
		return 1
	fi
	mkdir -p "$(dirname "$2")"
	install -m "$3" "$1" "$2.new.$$"
	mv -f "$2.new.$$" "$2"
}

dest=$PREFIX/gridcity-agent
if [ -e "$dest" ] && [ "$binary" -ef "$dest" ]; then
	: # installing from the installed copy
elif install_file "$binary" "$dest" 0755; then
	say "installed $dest ($version)"
	changed=1
fi

if [ "$new_config" = 1 ]; then
	[ -d "$ETC" ] || install -d -m 0755 "$ETC"
	install_file "$config" "$CONFIG" 0644 || true
	say "wrote $CONFIG (name: $cfg_name, runAs: root, commands: true)"
	changed=1
fi

# agent.env from a release whose agent read GRIDCITY_<FLAG>: the agent now reads
# GRIDCITY_AGENT_<FLAG> (GRIDCITY_<FLAG> is the coordinator's) and ignores the old names, so
# rename them. Every variable in this file is the agent's. An old name whose new name is set
# too is commented out (the new one was written for this agent); other lines stay as they are.
ENV_FILE=$ETC/agent.env
if [ -f "$ENV_FILE" ]; then
	renamed=""
	while IFS= read -r l || [ -n "$l" ]; do
		if [[ $l =~ ^[[:space:]]*GRIDCITY_([A-Z0-9_]+)= ]] && [[ ${BASH_REMATCH[1]} != AGENT_* ]]; then
			v=${BASH_REMATCH[1]}
			renamed+=" GRIDCITY_$v"
			if grep -q "^[[:space:]]*GRIDCITY_AGENT_$v=" "$ENV_FILE"; then
				printf '# %s   # ignored: GRIDCITY_AGENT_%s is set (renamed by install-agent.sh)\n' "$l" "$v"
			else
				printf '%s\n' "${l/GRIDCITY_$v=/GRIDCITY_AGENT_$v=}"
			fi
		else
			printf '%s\n' "$l"
		fi
	done <"$ENV_FILE" >"$tmp/agent.env"
	if [ -n "$renamed" ]; then
		cp -p "$ENV_FILE" "$ENV_FILE.old"
		install_file "$tmp/agent.env" "$ENV_FILE" "$(stat -c %a "$ENV_FILE")" || true
		say "renamed$renamed in $ENV_FILE to GRIDCITY_AGENT_… (the agent no longer reads the coordinator's GRIDCITY_<FLAG> names); the previous file is $ENV_FILE.old"
		changed=1
	fi
fi

# The unit, with the paths this installation uses.
unit=$tmp/gridcity-agent.service
state_dir_lines="s|^StateDirectory=.*|StateDirectory=${STATE#/var/lib/}|"
case $STATE in
/var/lib/?*) ;;
*) state_dir_lines='/^StateDirectory/d' ;; # systemd manages only directories under /var/lib
esac
sed -e "/^#/!s|/usr/local/bin/gridcity-agent|$PREFIX/gridcity-agent|g" \
	-e "/^#/!s|--state /var/lib/gridcity-agent|--state $STATE|g" \
	-e "/^#/!s|=/var/lib/gridcity-agent/identity.json|=$IDENTITY|g" \
	-e "/^#/!s|/etc/gridcity/|$ETC/|g" \
	-e "$state_dir_lines" \
	"$UNIT_SRC" >"$unit"
if install_file "$unit" "$UNIT_DIR/gridcity-agent.service" 0644; then
	say "installed $UNIT_DIR/gridcity-agent.service"
	changed=1
fi

say "enrolled as \"$enrolled_as\" with the coordinator at $coordinator (identity: $IDENTITY)"

run_cmd="$dest run --state $STATE --config $CONFIG"
case $UNIT_DIR in
/etc/systemd/system | /run/systemd/system | /usr/lib/systemd/system | /lib/systemd/system | /usr/local/lib/systemd/system) unit_loaded=1 ;;
*) unit_loaded=0 ;;
esac
if [ ! -d /run/systemd/system ] || [ "$unit_loaded" = 0 ]; then
	if [ "$unit_loaded" = 0 ]; then
		say "systemd does not load units from $UNIT_DIR, so nothing was enabled or started."
	else
		say "systemd is not running here (PID 1 is $(cat /proc/1/comm 2>/dev/null || echo unknown)), so nothing was enabled or started."
	fi
	say "Start the agent by hand (it runs in the foreground; put it under your init system or add &):"
	printf '\n  %s\n\n' "$run_cmd"
	exit 0
fi

systemctl daemon-reload
systemctl enable --quiet gridcity-agent.service
if [ "$start" = 0 ]; then
	if systemctl is-active --quiet gridcity-agent.service; then
		if [ "$changed" = 1 ]; then
			say "gridcity-agent is running, and was not restarted (--no-start): systemctl restart gridcity-agent to apply the changes"
		else
			say "gridcity-agent is running and nothing changed"
		fi
	else
		say "gridcity-agent is enabled (it starts at boot) but not started (--no-start): systemctl start gridcity-agent"
	fi
	exit 0
fi
if [ "$changed" = 0 ] && systemctl is-active --quiet gridcity-agent.service; then
	say "gridcity-agent is already running and nothing changed"
	exit 0
fi
t0=$(date +%s)
systemctl restart gridcity-agent.service
# The agent retries the coordinator by itself; it exits only for what a restart cannot fix
# (bad config, revoked). Give it a moment to show that.
sleep 3
state=$(systemctl show -p ActiveState --value gridcity-agent.service)
sub=$(systemctl show -p SubState --value gridcity-agent.service)
if [ "$state" != active ] || [ "$sub" != running ]; then
	journalctl -u gridcity-agent.service --since "@$t0" --no-pager -o cat >&2 || true
	die "gridcity-agent did not stay up ($state/$sub; its log is above; more: journalctl -u gridcity-agent)"
fi
say "gridcity-agent is running: systemctl status gridcity-agent, journalctl -u gridcity-agent -f"
