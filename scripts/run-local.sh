#!/usr/bin/env bash
# make run: a coordinator on its embedded store and an agent for this machine,
# both in the foreground of this terminal; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${GRIDCITY_RUN_DIR:-.run}
DATA=$RUN/coordinator
STATE=$RUN/agent
HTTP=${GRIDCITY_HTTP:-127.0.0.1:4600}
GRPC=${GRIDCITY_GRPC:-127.0.0.1:4601}
mkdir -p "$RUN"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

bin/gridcity serve --data "$DATA" --http "$HTTP" --grpc "$GRPC" --advertise "$GRPC" >>"$RUN/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/${HTTP%:*}/${HTTP##*:}") 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "the coordinator did not start:"; tail -20 "$RUN/coordinator.log"; exit 1; }
  sleep 0.1
done

# Enroll once; later runs reuse the identity in $STATE.
join=""
[ -f "$STATE/identity.json" ] || join=$(bin/gridcity join --data "$DATA" --json | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
bin/gridcity-agent run --state "$STATE" ${join:+--join "$join"} >>"$RUN/agent.log" 2>&1 &
pids+=($!)

bin/gridcity mcp --data "$DATA"
cat <<TXT

App:           http://$HTTP/   (the approval app arrives with run_command)
Logs:          $RUN/coordinator.log, $RUN/agent.log
Data:          $DATA (delete $RUN to start from scratch)

Add another server:  bin/gridcity join --data $DATA
Ctrl-C stops the coordinator and the agent.
TXT
wait -n "${pids[@]}" || true
echo "a process ended; see $RUN/*.log"
