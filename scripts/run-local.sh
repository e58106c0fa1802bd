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

WHAT="make run"
LOGS=("$RUN/coordinator.log" "$RUN/agent.log")
. "$ROOT/scripts/lib/local.sh"

for addr in "$HTTP" "$GRPC"; do
	if listening "$addr"; then
		die "$addr is already in use — is another 'make run' (or gridcity serve) running? Stop it, or choose other ports with GRIDCITY_HTTP and GRIDCITY_GRPC."
	fi
done

pids=()
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
wait_healthy "$coord" "$HTTP" || die "the coordinator did not start, or did not answer /healthz on $HTTP within 10 s"
say "the coordinator is up on http://$HTTP/ (gRPC $GRPC)"

enroll_agent "$GC" "$STATE" "$NAME" "$RUN/agent.log" --data "$DATA"

say "starting the agent (log: $RUN/agent.log) and waiting for it to connect…"
"${agent_env[@]}" "$AGENT" run --state "$STATE" >>"$RUN/agent.log" 2>&1 &
agent=$!
pids+=("$agent")
wait_agent "$agent" "$HTTP"

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

supervise "${pids[@]}"
echo
echo "make run: stopped; the state stays in $RUN"
