#!/usr/bin/env bash
# install-coordinator.sh — install the gridcity coordinator and run it under systemd.
#
#   sudo deploy/install-coordinator.sh [--binary PATH] [--http ADDR] [--grpc ADDR]
#                                      [--advertise HOST:PORT] [--no-start]
#
# Creates the `gridcity` system user, installs the binary and gridcity.service, writes the
# given flags into /etc/gridcity/coordinator.env (GRIDCITY_HTTP, GRIDCITY_GRPC,
# GRIDCITY_ADVERTISE; other lines in that file are kept), starts the coordinator, waits for
# /healthz and prints how to add servers and connect an AI client. Re-running is safe.
#
# One of several coordinators on PostgreSQL: give the store URL in GRIDCITY_STORE (not on a
# command line, which other users can read), and the unseal key file every coordinator of that
# store is given (made once: openssl rand -hex 32 > unseal.key; chmod 600 unseal.key; then
# copied to each host) in GRIDCITY_UNSEAL_KEY_FILE:
#   read -rs GRIDCITY_STORE && export GRIDCITY_STORE    # paste postgres://USER:PASSWORD@HOST:5432/DB
#   sudo --preserve-env=GRIDCITY_STORE GRIDCITY_UNSEAL_KEY_FILE=$PWD/unseal.key \
#       deploy/install-coordinator.sh --advertise THIS-HOST:4601
# The URL goes into coordinator.env, which is root's alone (mode 0600) since it may hold a
# password; systemd reads it as root before starting the service. The key is installed as
# /etc/gridcity/unseal.key, the service user's alone (0600), and coordinator.env names it.
#
# Paths (override for packaging or tests; the unit is rewritten to match):
#   GRIDCITY_PREFIX    /usr/local/bin         the binary
#   GRIDCITY_ETC       /etc/gridcity          coordinator.env
#   GRIDCITY_DATA      /var/lib/gridcity      the store, the CA, mcp-token, coordinator.json
#   GRIDCITY_UNIT_DIR  /etc/systemd/system    gridcity.service
#   GRIDCITY_USER      gridcity               the service user (created if missing)
set -euo pipefail

prog=install-coordinator
say() { printf '%s: %s\n' "$prog" "$*"; }
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }

usage() {
	cat <<'EOF'
Usage: install-coordinator.sh [--binary PATH] [--http ADDR] [--grpc ADDR] [--advertise HOST:PORT] [--no-start]

Installs the gridcity coordinator as gridcity.service, running as the `gridcity` user with its
data in /var/lib/gridcity, and starts it when systemd runs this machine.

  --binary PATH          the gridcity binary to install
                         (default: ./bin/gridcity, else bin/ next to this deploy/ folder)
  --http ADDR            MCP endpoint and app (default 127.0.0.1:4600; a non-loopback address
                         also needs GRIDCITY_TLS_CERT/KEY or GRIDCITY_PUBLIC_HTTP in coordinator.env)
  --grpc ADDR            where agents connect, always TLS (default :4601)
  --advertise HOST:PORT  the address written into join lines (default: this host's first
                         non-loopback address and the gRPC port)
  --no-start             install and enable, but do not start now

The flags are stored in /etc/gridcity/coordinator.env; re-run with other values to change them.
GRIDCITY_STORE=postgres://… in the environment (sudo --preserve-env=GRIDCITY_STORE) is written
there too: a coordinator of several on one PostgreSQL. The file is mode 0600 (root). Such a
coordinator needs the unseal key every coordinator of the store is given:
GRIDCITY_UNSEAL_KEY_FILE=FILE (made once with `openssl rand -hex 32 > FILE`) is installed as
/etc/gridcity/unseal.key, the service user's alone (0600).
Environment: GRIDCITY_PREFIX, GRIDCITY_ETC, GRIDCITY_DATA, GRIDCITY_UNIT_DIR, GRIDCITY_USER,
GRIDCITY_STORE, GRIDCITY_UNSEAL_KEY_FILE.
EOF
}

if [ "$(id -u)" -ne 0 ]; then
	die "must run as root: it creates the gridcity user and installs a binary and a systemd unit (try: sudo $0)"
fi

binary="" http="" grpc="" advertise="" start=1
need() { [ "$2" -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
	case $1 in
	--binary) need "$1" $#; binary=$2; shift 2 ;;
	--binary=*) binary=${1#*=}; shift ;;
	--http) need "$1" $#; http=$2; shift 2 ;;
	--http=*) http=${1#*=}; shift ;;
	--grpc) need "$1" $#; grpc=$2; shift 2 ;;
	--grpc=*) grpc=${1#*=}; shift ;;
	--advertise) need "$1" $#; advertise=$2; shift 2 ;;
	--advertise=*) advertise=${1#*=}; shift ;;
	--no-start) start=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
for a in http grpc advertise; do
	v=${!a}
	case $v in
	*[!A-Za-z0-9.:_\[\]-]*) die "--$a $v: give HOST:PORT" ;;
	?*:[0-9]* | :[0-9]*) ;;
	"") ;;
	*) die "--$a $v: give HOST:PORT (with the port)" ;;
	esac
done

PREFIX=${GRIDCITY_PREFIX:-/usr/local/bin}
ETC=${GRIDCITY_ETC:-/etc/gridcity}
DATA=${GRIDCITY_DATA:-/var/lib/gridcity}
UNIT_DIR=${GRIDCITY_UNIT_DIR:-/etc/systemd/system}
SVC_USER=${GRIDCITY_USER:-gridcity}
for v in PREFIX ETC DATA UNIT_DIR; do
	p=${!v}
	case $p in /*) ;; *) die "GRIDCITY_$v=$p: give an absolute path" ;; esac
	case $p in *[!A-Za-z0-9/._+-]*) die "GRIDCITY_$v=$p: use only letters, digits and / . _ + - (the path goes into a systemd unit)" ;; esac
done
case $SVC_USER in '' | *[!a-z0-9_-]*) die "GRIDCITY_USER=$SVC_USER: not a user name" ;; esac
# The store URL, for coordinator.env, single-quoted there (systemd and sh both read it).
store=${GRIDCITY_STORE:-}
case $store in
"") ;;
*[[:space:]\'\"\\]*) die "GRIDCITY_STORE: the URL holds a space, a quote or a backslash: percent-encode it (a ' in a password is %27)" ;;
postgres://?* | postgresql://?*) ;;
*) die "GRIDCITY_STORE: want postgres://USER:PASSWORD@HOST:5432/DATABASE (or unset it for the embedded SQLite store)" ;;
esac
# The unseal key file to install, checked without ever printing it.
make_key="make one once with: openssl rand -hex 32 > unseal.key; chmod 600 unseal.key; and give the same file to every coordinator of the store"
keysrc=${GRIDCITY_UNSEAL_KEY_FILE:-}
if [ -n "$keysrc" ]; then
	case $keysrc in /*) ;; *) keysrc=$PWD/$keysrc ;; esac
	[ -f "$keysrc" ] && [ -r "$keysrc" ] || die "GRIDCITY_UNSEAL_KEY_FILE=$keysrc is not a readable file: give the unseal key file ($make_key)"
	tr -d '[:space:]' <"$keysrc" | grep -qE '^[0-9a-fA-F]{64}$' || die "GRIDCITY_UNSEAL_KEY_FILE=$keysrc does not hold an unseal key (64 hex digits): $make_key"
fi

HERE=$(cd "$(dirname "$0")" && pwd)
UNIT_SRC=$HERE/systemd/gridcity.service
[ -f "$UNIT_SRC" ] || die "missing $UNIT_SRC: run this script from the gridcity deploy/ folder, with its systemd/ folder beside it"

if [ -z "$binary" ]; then
	for c in ./bin/gridcity "$HERE/../bin/gridcity" "$HERE/gridcity"; do
		if [ -f "$c" ]; then binary=$c; break; fi
	done
	[ -n "$binary" ] || die "no gridcity binary in ./bin or $HERE/../bin: build one with \`make build\`, or pass --binary PATH"
fi
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then die "--binary $binary is not an executable file"; fi
version=$("$binary" version 2>&1) || die "$binary does not run on this machine: $version"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-install-coordinator.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
changed=0

# install_file SRC DEST MODE: replace DEST atomically when its content differs.
install_file() {
	if [ -f "$2" ] && cmp -s "$1" "$2" 2>/dev/null; then
		return 1
	fi
	mkdir -p "$(dirname "$2")"
	install -m "$3" "$1" "$2.new.$$"
	mv -f "$2.new.$$" "$2"
}

# The service user: a static system user, so that the CLI can run as it against the same store
# (see the comment at the top of gridcity.service).
if ! id -u "$SVC_USER" >/dev/null 2>&1; then
	nologin=/usr/sbin/nologin
	[ -x "$nologin" ] || nologin=/sbin/nologin
	[ -x "$nologin" ] || nologin=/bin/false
	if command -v useradd >/dev/null 2>&1; then
		useradd --system --user-group --home-dir "$DATA" --no-create-home --shell "$nologin" \
			--comment "gridcity coordinator" "$SVC_USER"
	elif command -v adduser >/dev/null 2>&1; then # busybox
		addgroup -S "$SVC_USER" && adduser -S -D -H -h "$DATA" -s "$nologin" -G "$SVC_USER" "$SVC_USER"
	else
		die "cannot create the $SVC_USER user (no useradd or adduser): create it as a system user, then re-run"
	fi
	say "created the system user $SVC_USER"
fi
SVC_GROUP=$(id -gn "$SVC_USER")

# The binary.
dest=$PREFIX/gridcity
if [ -e "$dest" ] && [ "$binary" -ef "$dest" ]; then
	:
elif install_file "$binary" "$dest" 0755; then
	say "installed $dest ($version)"
	changed=1
fi

# coordinator.env: a commented template the first time; each given flag replaces its line.
ENVFILE=$ETC/coordinator.env
[ -d "$ETC" ] || install -d -m 0755 "$ETC"

# The unseal key: a replica on PostgreSQL refuses to start without it, so it is asked for here.
KEYFILE=$ETC/unseal.key
if [ -z "$keysrc" ] && [ ! -f "$KEYFILE" ] && { [ -n "$store" ] || grep -q '^GRIDCITY_STORE=' "$ENVFILE" 2>/dev/null; }; then
	die "a coordinator on PostgreSQL needs the unseal key every coordinator of its store is given: $make_key; then run: sudo --preserve-env=GRIDCITY_STORE GRIDCITY_UNSEAL_KEY_FILE=\$PWD/unseal.key $0 …"
fi
if [ -n "$keysrc" ] && ! { [ -f "$KEYFILE" ] && cmp -s "$keysrc" "$KEYFILE"; }; then
	install -m 0600 -o "$SVC_USER" -g "$SVC_GROUP" "$keysrc" "$KEYFILE.new.$$"
	mv -f "$KEYFILE.new.$$" "$KEYFILE"
	say "installed the unseal key as $KEYFILE ($SVC_USER's alone, 0600)"
	changed=1
fi
if [ -f "$KEYFILE" ] && { [ "$(stat -c %a "$KEYFILE")" != 600 ] || [ "$(stat -c %U "$KEYFILE")" != "$SVC_USER" ]; }; then
	chown "$SVC_USER:$SVC_GROUP" "$KEYFILE"
	chmod 0600 "$KEYFILE"
	say "made $KEYFILE $SVC_USER's alone (0600): it opens the CA key in the store"
fi
if [ -f "$ENVFILE" ]; then
	cp "$ENVFILE" "$tmp/env"
else
	cat >"$tmp/env" <<'EOF'
# gridcity coordinator settings, read by gridcity.service (EnvironmentFile=).
# Every `gridcity serve` flag reads GRIDCITY_<FLAG>; --data is fixed by the unit.
# install-coordinator.sh --http/--grpc/--advertise rewrite their lines; the rest is yours.
# After a change: systemctl restart gridcity
#GRIDCITY_HTTP=127.0.0.1:4600
#GRIDCITY_GRPC=:4601
#GRIDCITY_ADVERTISE=HOST:4601
#GRIDCITY_TLS_CERT=/etc/gridcity/tls.crt
#GRIDCITY_TLS_KEY=/etc/gridcity/tls.key
#GRIDCITY_PUBLIC_HTTP=false
#GRIDCITY_LOG_LEVEL=info
# One of several coordinators on PostgreSQL (this file is root's alone, mode 0600), with the
# unseal key every one of them is given (the gridcity user's alone, mode 0600):
#GRIDCITY_STORE='postgres://USER:PASSWORD@HOST:5432/DATABASE'
#GRIDCITY_UNSEAL_KEY_FILE=/etc/gridcity/unseal.key
EOF
fi
# set_env KEY VALUE: replace the first KEY= or #KEY= line, drop other KEY= lines, else append.
set_env() {
	awk -v k="$1" -v v="$2" '
		$0 ~ "^#?" k "=" { if (!done) { print k "=" v; done = 1 }; next }
		{ print }
		END { if (!done) print k "=" v }
	' "$tmp/env" >"$tmp/env.new"
	mv "$tmp/env.new" "$tmp/env"
}
[ -z "$http" ] || set_env GRIDCITY_HTTP "$http"
[ -z "$grpc" ] || set_env GRIDCITY_GRPC "$grpc"
[ -z "$advertise" ] || set_env GRIDCITY_ADVERTISE "$advertise"
[ -z "$store" ] || set_env GRIDCITY_STORE "'$store'"
[ ! -f "$KEYFILE" ] || set_env GRIDCITY_UNSEAL_KEY_FILE "$KEYFILE"
if install_file "$tmp/env" "$ENVFILE" 0600; then
	say "wrote $ENVFILE"
	changed=1
fi
# Root's alone, also when an earlier installer left it readable: it may hold the store's password.
if [ "$(stat -c %a "$ENVFILE")" != 600 ] || [ "$(stat -c %u "$ENVFILE")" != 0 ]; then
	chown 0:0 "$ENVFILE"
	chmod 0600 "$ENVFILE"
	say "made $ENVFILE root's alone (0600): it may hold the store's password"
fi
# env_value KEY: the value in coordinator.env (last uncommented line), quotes removed.
env_value() {
	sed -n "s/^$1=//p" "$ENVFILE" | tail -n 1 | sed -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"
}

# The data directory, owned by the service user (systemd's StateDirectory= does the same when
# it starts the unit; doing it here also serves a start by hand). A directory left by a
# `gridcity serve` run as root is handed over whole.
if [ -d "$DATA" ]; then
	if [ "$(stat -c %U "$DATA")" != "$SVC_USER" ]; then
		chown -R "$SVC_USER:$SVC_GROUP" "$DATA"
		say "handed $DATA over to $SVC_USER"
	fi
else
	mkdir -p "$(dirname "$DATA")"
	install -d -m 0700 -o "$SVC_USER" -g "$SVC_GROUP" "$DATA"
fi
chmod 0700 "$DATA"

# The unit, with this installation's paths and user.
state_dir="s|^StateDirectory=.*|StateDirectory=${DATA#/var/lib/}|"
case $DATA in
/var/lib/?*) ;;
# systemd manages only directories under /var/lib; elsewhere the data directory must be made
# writable explicitly, as ProtectSystem=strict makes everything else read-only.
*) state_dir="s|^StateDirectory=.*|ReadWritePaths=$DATA|; /^StateDirectoryMode=/d" ;;
esac
sed -e "/^#/!s|/usr/local/bin/gridcity |$PREFIX/gridcity |g" \
	-e "/^#/!s|--data /var/lib/gridcity|--data $DATA|g" \
	-e "/^#/!s|/etc/gridcity/|$ETC/|g" \
	-e "/^#/!s|^User=.*|User=$SVC_USER|" \
	-e "/^#/!s|^Group=.*|Group=$SVC_GROUP|" \
	-e "$state_dir" \
	"$UNIT_SRC" >"$tmp/gridcity.service"
if install_file "$tmp/gridcity.service" "$UNIT_DIR/gridcity.service" 0644; then
	say "installed $UNIT_DIR/gridcity.service"
	changed=1
fi

# How to run the CLI as the service user, so that every file in $DATA stays its own; with the
# store in PostgreSQL, with GRIDCITY_STORE from coordinator.env, which only root reads.
if [ "$SVC_USER" = root ]; then
	as_user="" run_as=""
elif command -v sudo >/dev/null 2>&1; then
	as_user="sudo -u $SVC_USER " run_as="runuser -u $SVC_USER -- "
else
	as_user="runuser -u $SVC_USER -- " run_as=$as_user
fi
cli() { # ARGS…: the command line that runs `gridcity ARGS…` as the service user
	if [ -n "$(env_value GRIDCITY_STORE)" ]; then
		printf "sudo sh -c 'set -a; . %s; set +a; exec %s%s %s'" "$ENVFILE" "$run_as" "$dest" "$*"
	else
		printf '%s%s %s' "$as_user" "$dest" "$*"
	fi
}

next_steps() {
	cat <<EOF

Add a server: mint a join line here (valid 1 h, one agent; --reusable --ttl 24h for many) ...
  $(cli join --data "$DATA")
... and run the agent installer there, as root, with the line it prints:
  deploy/install-agent.sh "gridcity://HOST:PORT/TOKEN/sha256:HEX"

Connect an AI client (prints the MCP endpoint, the token and a Claude Code command):
  $(cli mcp --data "$DATA")
  $(cli mcp --data "$DATA" --json)
EOF
	if [ -f "$DATA/admin-password" ]; then
		printf '\nThe approval app'"'"'s admin password is in %s (readable by root and %s).\n' "$DATA/admin-password" "$SVC_USER"
	fi
}

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
	say "Start the coordinator by hand, as $SVC_USER with the settings in $ENVFILE (it runs in the foreground; root reads the file):"
	if [ "$SVC_USER" = root ]; then
		as=""
	elif command -v runuser >/dev/null 2>&1; then
		as="runuser -u $SVC_USER -- "
	else
		as="su -s /bin/sh $SVC_USER -c "
	fi
	if [ "${as#su }" != "$as" ]; then
		printf "\n  sh -c 'set -a; . %s; set +a; exec %s\"exec %s serve --data %s\"'\n" "$ENVFILE" "$as" "$dest" "$DATA"
	else
		printf "\n  sh -c 'set -a; . %s; set +a; exec %s%s serve --data %s'\n" "$ENVFILE" "$as" "$dest" "$DATA"
	fi
	next_steps
	exit 0
fi

systemctl daemon-reload
systemctl enable --quiet gridcity.service
if [ "$start" = 0 ]; then
	if systemctl is-active --quiet gridcity.service; then
		if [ "$changed" = 1 ]; then
			say "gridcity is running, and was not restarted (--no-start): systemctl restart gridcity to apply the changes"
		else
			say "gridcity is running and nothing changed"
		fi
	else
		say "gridcity is enabled (it starts at boot) but not started (--no-start): systemctl start gridcity"
	fi
	next_steps
	exit 0
fi
t0=$(date +%s)
if [ "$changed" = 0 ] && systemctl is-active --quiet gridcity.service; then
	say "gridcity is already running and nothing changed"
else
	systemctl restart gridcity.service
fi

# Wait for /healthz on the HTTP address the coordinator was given.
addr=${http:-$(env_value GRIDCITY_HTTP)}
addr=${addr:-127.0.0.1:4600}
host=${addr%:*} port=${addr##*:}
case $host in "" | 0.0.0.0) host=127.0.0.1 ;; "[::]") host="[::1]" ;; esac
scheme=http
[ -z "$(env_value GRIDCITY_TLS_CERT)" ] || scheme=https
url=$scheme://$host:$port/healthz
healthy=0
for _ in $(seq 1 60); do
	if command -v curl >/dev/null 2>&1; then
		# -k: only for this local liveness check; the certificate's names need not include $host.
		if curl -fsSk --max-time 2 "$url" >/dev/null 2>&1; then healthy=1; break; fi
	elif command -v wget >/dev/null 2>&1; then
		if wget -q --no-check-certificate -T 2 -O /dev/null "$url" 2>/dev/null; then healthy=1; break; fi
	else
		say "neither curl nor wget is installed: not checking $url"
		healthy=2
		break
	fi
	# Exited (and waiting to be restarted, or given up on): no use waiting longer.
	case $(systemctl show -p ActiveState --value gridcity.service)/$(systemctl show -p SubState --value gridcity.service) in
	failed/* | */auto-restart) break ;;
	esac
	sleep 0.5
done
if [ "$healthy" = 0 ]; then
	journalctl -u gridcity.service --since "@$t0" --no-pager -o cat >&2 || true
	die "the coordinator did not come up on $url (its log is above; more: journalctl -u gridcity)"
fi
[ "$healthy" != 1 ] || say "gridcity is running and healthy: $url"

advertised=$(sed -n 's/^[[:space:]]*"advertise":[[:space:]]*"\([^"]*\)".*/\1/p' "$DATA/coordinator.json" 2>/dev/null | head -n 1)
if [ -n "$advertised" ]; then
	say "join lines tell agents to dial $advertised (gRPC, TLS): open that port to your servers"
	case $advertised in
	127.* | localhost:* | "[::1]:"*)
		say "warning: that is a loopback address, which only an agent on this host can reach; re-run with --advertise HOST:PORT" ;;
	esac
fi
next_steps
