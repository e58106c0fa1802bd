#!/usr/bin/env bash
# make run-ha: three coordinators sharing one PostgreSQL, and an agent for
# this machine, in the foreground of this terminal; Ctrl-C stops them all
# (the agent, the coordinators, then PostgreSQL).
#
# PostgreSQL is Debian's (the postgresql package), a cluster of its own
# initialised in .run/ha/pg on a free loopback port, its unix socket there
# too; as root it runs as the postgres user (or nobody), since PostgreSQL
# refuses to run as root. Each coordinator has its own --data (.run/ha/c1 …
# c3: its addresses and its local MCP token) and its own loopback ports;
# the store URL reaches them in GRIDCITY_STORE, and the unseal key they
# share (.run/ha/unseal.key, 0600, made once: it opens the CA key in the
# database, which outlives a run) in GRIDCITY_UNSEAL_KEY_FILE, both
# written to .run/ha/coordinator.env (0600) as an installed coordinator
# reads them.
#
# Environment:
#   GRIDCITY_HA_HTTP     the replicas' HTTP addresses (default
#                        "127.0.0.1:4610 127.0.0.1:4620 127.0.0.1:4630")
#   GRIDCITY_HA_GRPC     their gRPC addresses (default
#                        "127.0.0.1:4611 127.0.0.1:4621 127.0.0.1:4631")
#   GRIDCITY_HA_PG_PORT  PostgreSQL's port (default: the first free from 4640)
#   GRIDCITY_RUN_DIR     where .run is (default: the repository's .run)
#   GRIDCITY_NAME        this machine's name in the fleet (default: hostname)
#   GRIDCITY_BIN_DIR     where gridcity and gridcity-agent are (default: bin, as make build leaves them)
set -euo pipefail
[ $# -eq 0 ] || { echo "make run-ha: no arguments (usage: scripts/run-ha.sh; settings in GRIDCITY_HA_* variables, see its head)" >&2; exit 2; }
cd "$(dirname "$0")/.."
ROOT=$PWD
RUN=${GRIDCITY_RUN_DIR:-$ROOT/.run}
HA=$RUN/ha
STATE=$HA/agent
NAME=${GRIDCITY_NAME:-$(hostname)}
BIN=${GRIDCITY_BIN_DIR:-$ROOT/bin}
GC=$BIN/gridcity
AGENT=$BIN/gridcity-agent
read -r -a HTTPS <<<"${GRIDCITY_HA_HTTP:-127.0.0.1:4610 127.0.0.1:4620 127.0.0.1:4630}"
read -r -a GRPCS <<<"${GRIDCITY_HA_GRPC:-127.0.0.1:4611 127.0.0.1:4621 127.0.0.1:4631}"
mkdir -p "$HA"
chmod 700 "$RUN" "$HA"

WHAT="make run-ha"
LOGS=("$HA/postgres.log" "$HA/c1.log" "$HA/c2.log" "$HA/c3.log" "$HA/agent.log")
. "$ROOT/scripts/lib/local.sh"

[ "${#HTTPS[@]}" = 3 ] && [ "${#GRPCS[@]}" = 3 ] ||
	die "GRIDCITY_HA_HTTP and GRIDCITY_HA_GRPC name three HOST:PORT each, one per replica (got \"${HTTPS[*]}\" and \"${GRPCS[*]}\")"
for addr in "${HTTPS[@]}" "${GRPCS[@]}"; do
	listening "$addr" && die "$addr is already in use — is another 'make run-ha' running? Stop it, or choose other ports with GRIDCITY_HA_HTTP and GRIDCITY_HA_GRPC."
done

. "$ROOT/scripts/lib/postgres.sh"
pg_find
pg_place "$HA" "$RUN" "$HA"

pids=()     # the agent and the coordinators
pg_pid=
cleanup() {
	local p
	# The agent first, then the coordinators (each says goodbye to the store),
	# then PostgreSQL (a fast shutdown).
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pg_stop
}
trap cleanup EXIT
trap 'stopping=1' INT TERM

for log in "${LOGS[@]}"; do rotate "$log"; done

# The cluster, once; its superuser's password in pg-password (0600).
pg_init "$HA/pg-password" "$HA/postgres.log"
[ -s "$HA/pg-password" ] || die "$HA/pg-password is missing, so the cluster in $PG/data cannot be reached: delete $HA to start afresh"
pw=$(cat "$HA/pg-password")

# The first port from 4640 that nothing listens on, unless set.
PG_PORT=${GRIDCITY_HA_PG_PORT:-}
if [ -z "$PG_PORT" ]; then
	for ((PG_PORT = 4640; PG_PORT < 4740; PG_PORT++)); do listening "127.0.0.1:$PG_PORT" || break; done
fi
listening "127.0.0.1:$PG_PORT" && die "127.0.0.1:$PG_PORT (PostgreSQL's port) is in use; set GRIDCITY_HA_PG_PORT to a free one"

say "starting PostgreSQL on 127.0.0.1:$PG_PORT, socket in $PG (log: $HA/postgres.log)…"
pg_start "$PG_PORT" "$HA/postgres.log"
pg_createdb gridcity "$HA/postgres.log"

# The unseal key every replica is given, once: the CA key in the database
# is sealed with it, so a new one would not open it.
if [ ! -s "$HA/unseal.key" ]; then
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$HA/unseal.key")
fi
# The store URL and the key, as an installed coordinator reads them (EnvironmentFile=).
export GRIDCITY_STORE="postgres://postgres:$pw@127.0.0.1:$PG_PORT/gridcity?sslmode=disable"
export GRIDCITY_UNSEAL_KEY_FILE=$HA/unseal.key
(umask 077 && printf 'GRIDCITY_STORE=%s\nGRIDCITY_UNSEAL_KEY_FILE=%s\n' "$GRIDCITY_STORE" "$GRIDCITY_UNSEAL_KEY_FILE" >"$HA/coordinator.env")

# The first replica alone (it makes the schema, the CA and the approver
# admin), then the other two.
start_replica() { # N
	local n=$1
	"$GC" serve --data "$HA/c$n" --http "${HTTPS[n - 1]}" --grpc "${GRPCS[n - 1]}" --advertise "${GRPCS[n - 1]}" >>"$HA/c$n.log" 2>&1 &
	pids+=($!)
	cpids[n]=$!
}
cpids=()
say "starting coordinator 1 of 3 (log: $HA/c1.log)…"
start_replica 1
wait_healthy "${cpids[1]}" "${HTTPS[0]}" || die "coordinator 1 did not start, or did not answer /healthz on ${HTTPS[0]} within 10 s"
say "starting coordinators 2 and 3 (logs: $HA/c2.log, $HA/c3.log)…"
start_replica 2
start_replica 3
for n in 2 3; do
	wait_healthy "${cpids[n]}" "${HTTPS[n - 1]}" || die "coordinator $n did not start, or did not answer /healthz on ${HTTPS[n - 1]} within 10 s"
done

enroll_agent "$GC" "$STATE" "$NAME" "$HA/agent.log" --data "$HA/c1"
say "starting the agent (log: $HA/agent.log), joined to coordinator 1, and waiting for it to connect…"
"${agent_env[@]}" "$AGENT" run --state "$STATE" >>"$HA/agent.log" 2>&1 &
agent=$!
pids=("$agent" "${pids[@]}")
wait_agent "$agent" "${HTTPS[0]}"

token=$("$GC" mcp --data "$HA/c1" --json | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
[ -n "$token" ] || die "gridcity mcp --json printed no token"
admin="(no $HA/c1/admin-password: add an approver with gridcity approver add NAME)"
[ -s "$HA/c1/admin-password" ] && admin=$(cat "$HA/c1/admin-password")
cat <<TXT

Three coordinators share the PostgreSQL at 127.0.0.1:$PG_PORT (database gridcity):

  replica 1   MCP http://${HTTPS[0]}/mcp   app http://${HTTPS[0]}/   agents ${GRPCS[0]}
  replica 2   MCP http://${HTTPS[1]}/mcp   app http://${HTTPS[1]}/   agents ${GRPCS[1]}
  replica 3   MCP http://${HTTPS[2]}/mcp   app http://${HTTPS[2]}/   agents ${GRPCS[2]}

Token:         $token   (header Authorization: Bearer …; valid on every replica)
App login:     admin / $admin   (on any replica)
Server:        $NAME (this machine) is online, its stream on replica 1; it knows all three
               and moves to another when its replica stops (try: kill -9 ${cpids[1]}).
Logs:          $HA/{postgres,c1,c2,c3,agent}.log (earlier runs': *.log.1 … *.log.$KEEP_LOGS)
Data:          $PG/data (PostgreSQL), $HA/c1 … c3, $HA/agent, $HA/unseal.key (delete $HA to start from scratch)
CLI:           set -a; . $HA/coordinator.env; set +a
               $GC token|agents|join|approver … --data $HA/c1

Ctrl-C stops the agent, the coordinators and PostgreSQL.
TXT

# A replica may die (that is what they are for: kill -9 one and watch the
# agent move); the agent may not, nor the last replica.
ended() { # PID STATUS
	local n
	for n in 1 2 3; do
		[ "${cpids[n]:-}" = "$1" ] || continue
		unset 'cpids[n]'
		[ "${#cpids[@]}" -gt 0 ] || return 1
		say "coordinator $n ended (exit status $2); the others carry on, and its agents move to them"
		return 0
	done
	return 1
}
supervise "${pids[@]}"
echo
echo "make run-ha: stopped; the state stays in $HA"
