#!/usr/bin/env bash
# make run: a coordinator on its embedded store and an agent for this machine,
# both in the foreground of this terminal; Ctrl-C stops both.
#
#   scripts/run-local.sh [--config FILE]     (make run CONFIG=FILE)
#
# --config FILE starts the coordinator with that config (GRIDCITY_CONFIG=FILE does too).
set -euo pipefail
config=""
while [ $# -gt 0 ]; do
	case $1 in
	--config) [ $# -ge 2 ] && [ -n "$2" ] || { echo "make run: --config needs a file (make run CONFIG=FILE)" >&2; exit 2; }; config=$2; shift 2 ;;
	--config=*) config=${1#*=}; shift ;;
	*) echo "make run: unknown argument \"$1\" (usage: scripts/run-local.sh [--config FILE], or make run CONFIG=FILE)" >&2; exit 2 ;;
	esac
done
config=${config:-${GRIDCITY_CONFIG:-}}
if [ -n "$config" ]; then
	# Relative to where make run was typed; the coordinator runs from the repository.
	[ -f "$config" ] || { echo "make run: the coordinator config $config does not exist (CONFIG=FILE names a YAML file; see the README's coordinator config)" >&2; exit 2; }
	config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
RUN=${GRIDCITY_RUN_DIR:-$ROOT/.run}
DATA=$RUN/coordinator
STATE=$RUN/agent
HTTP=${GRIDCITY_HTTP:-127.0.0.1:4600}
GRPC=${GRIDCITY_GRPC:-127.0.0.1:4601}
NAME=${GRIDCITY_NAME:-$(hostname)}
GC=$ROOT/bin/gridcity
AGENT=$ROOT/bin/gridcity-agent
mkdir -p "$RUN"
chmod 700 "$RUN"

say() { echo "make run: $*"; }

# rotate LOG: keep the previous runs' logs as LOG.1 (the last run) … LOG.$KEEP_LOGS.
KEEP_LOGS=3
rotate() {
	local i
	[ -e "$1" ] || return 0
	for ((i = KEEP_LOGS - 1; i >= 1; i--)); do
		[ ! -e "$1.$i" ] || mv -f "$1.$i" "$1.$((i + 1))"
	done
	mv -f "$1" "$1.1"
}

die() {
	echo "make run: $*" >&2
	for log in "$RUN"/coordinator.log "$RUN"/agent.log; do
		[ -s "$log" ] && { echo "--- last lines of $log" >&2; tail -n 8 "$log" >&2; }
	done
	exit 1
}

# http_get PATH: a GET on the coordinator's HTTP port with bash alone (no curl on a fresh machine).
http_get() {
	exec 3<>"/dev/tcp/${HTTP%:*}/${HTTP##*:}" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$HTTP" >&3
	cat <&3
	exec 3<&-
}

for addr in "$HTTP" "$GRPC"; do
	if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
		die "$addr is already in use — is another 'make run' (or gridcity serve) running? Stop it, or choose other ports with GRIDCITY_HTTP and GRIDCITY_GRPC."
	fi
done

# The agent reads GRIDCITY_AGENT_<FLAG>; the GRIDCITY_<FLAG> settings in this shell
# (GRIDCITY_CONFIG=city.yaml make run) are the coordinator's: keep them from the agent,
# which would only warn that it ignores them.
agent_env=(env)
for v in $(compgen -e); do
	case $v in GRIDCITY_AGENT_*) ;; GRIDCITY_*) agent_env+=(-u "$v") ;; esac
done

pids=()
stopping=0
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'stopping=1' INT TERM

rotate "$RUN/coordinator.log"
rotate "$RUN/agent.log"
say "starting the coordinator (log: $RUN/coordinator.log; the previous run's is coordinator.log.1)…"
"$GC" serve --data "$DATA" --http "$HTTP" --grpc "$GRPC" --advertise "$GRPC" ${config:+--config "$config"} >>"$RUN/coordinator.log" 2>&1 &
coord=$!
pids+=("$coord")
for _ in $(seq 1 100); do
	kill -0 "$coord" 2>/dev/null || die "the coordinator did not start"
	http_get /healthz 2>/dev/null | grep -q '"status":"ok"' && break
	sleep 0.1
done
kill -0 "$coord" 2>/dev/null || die "the coordinator did not start"
http_get /healthz 2>/dev/null | grep -q '"status":"ok"' || die "the coordinator did not answer /healthz on $HTTP within 10 s"
say "the coordinator is up on http://$HTTP/ (gRPC $GRPC)"

# Enroll once; later runs reuse the identity in $STATE. A store that was
# reset (a new CA) or an agent state that was deleted means enrolling anew.
line=$("$GC" join --data "$DATA" --json 2>/dev/null | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
[ -n "$line" ] || die "gridcity join failed"
pin=${line##*/}
if [ -f "$STATE/identity.json" ] && ! grep -q "\"caPin\": \"$pin\"" "$STATE/identity.json"; then
	echo "make run: the coordinator's store is new; enrolling this machine again"
	rm -rf "$STATE"
fi
if [ ! -f "$STATE/identity.json" ]; then
	say "enrolling this machine's agent as $NAME…"
	# This machine's old enrollment (if any) belongs to a deleted agent state.
	"$GC" agents revoke "$NAME" --data "$DATA" >/dev/null 2>&1 || true
	"${agent_env[@]}" "$AGENT" enroll --join "$line" --state "$STATE" --name "$NAME" >>"$RUN/agent.log" 2>&1 || die "the agent could not enroll"
fi

say "starting the agent (log: $RUN/agent.log) and waiting for it to connect…"
"${agent_env[@]}" "$AGENT" run --state "$STATE" >>"$RUN/agent.log" 2>&1 &
agent=$!
pids+=("$agent")
for _ in $(seq 1 300); do
	kill -0 "$agent" 2>/dev/null || die "the agent stopped"
	http_get /healthz 2>/dev/null | grep -q '"agentsConnected":[1-9]' && break
	sleep 0.1
done
http_get /healthz 2>/dev/null | grep -q '"agentsConnected":[1-9]' || die "the agent did not connect within 30 s"

"$GC" mcp --data "$DATA"
cat <<TXT

App:           http://$HTTP/   (approve commands here: user admin, password in $DATA/admin-password)
Server:        $NAME (this machine) is online; ask your AI client for list_servers.
Config:        ${config:-none: no resources, districts, declared links or runbooks (make run CONFIG=FILE loads one)}
Logs:          $RUN/coordinator.log, $RUN/agent.log (earlier runs': *.log.1 … *.log.$KEEP_LOGS)
Data:          $DATA (delete $RUN to start from scratch)
CLI:           $GC token|agents|join … --data $DATA

Ctrl-C stops the coordinator and the agent.
TXT

# Until Ctrl-C (or a TERM): the trap sets stopping. The coordinator and the
# agent get Ctrl-C's SIGINT themselves and stop cleanly, exit 0; so do they
# when the signal reaches them alone (this script started in the
# background, where SIGINT is ignored and its trap cannot fire). Either
# way that is a stop, not a failure; any other end is.
while [ "$stopping" = 0 ]; do
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null && continue
		rc=0
		wait "$p" 2>/dev/null || rc=$?
		case "$stopping:$rc" in
		1:* | 0:0 | 0:130 | 0:143) stopping=1 ;;
		*) die "a process ended unexpectedly (exit status $rc)" ;;
		esac
	done
	# Ctrl-C interrupts the sleep too; that is no error.
	sleep 0.5 || true
done
echo
echo "make run: stopped; the state stays in $RUN"
