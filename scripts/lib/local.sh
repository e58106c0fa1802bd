# Shared by scripts/run-local.sh (make run) and scripts/run-ha.sh (make
# run-ha): the parts that start gridcity's processes in this terminal,
# enroll this machine's agent, and stop everything on Ctrl-C. Sourced, not
# run. The sourcing script sets WHAT (the name in its messages, "make run"),
# RUN (its state directory) and LOGS (the logs die shows the end of).

say() { echo "$WHAT: $*"; }

die() {
	local log
	echo "$WHAT: $*" >&2
	for log in "${LOGS[@]}"; do
		[ -s "$log" ] && { echo "--- last lines of $log" >&2; tail -n 8 "$log" >&2; }
	done
	exit 1
}

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

# listening HOST:PORT: something accepts connections there (bash alone).
listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# http_get HOST:PORT PATH: a GET with bash alone (no curl on a fresh machine).
http_get() {
	exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
	cat <&3
	exec 3<&-
}

# wait_healthy PID HOST:PORT: the coordinator PID answers /healthz within 10 s.
wait_healthy() {
	local _
	for _ in $(seq 1 100); do
		kill -0 "$1" 2>/dev/null || return 1
		http_get "$2" /healthz 2>/dev/null | grep -q '"status":"ok"' && return 0
		sleep 0.1
	done
	return 1
}

# The agent reads GRIDCITY_AGENT_<FLAG>; the GRIDCITY_<FLAG> settings in this
# shell (GRIDCITY_CONFIG=city.yaml make run, GRIDCITY_STORE) are the
# coordinator's: keep them from the agent, which would only warn that it
# ignores them. "${agent_env[@]}" AGENT … runs the agent without them.
agent_env=(env)
for v in $(compgen -e); do
	case $v in GRIDCITY_AGENT_*) ;; GRIDCITY_*) agent_env+=(-u "$v") ;; esac
done

# enroll_agent GC STATE NAME LOG STORE_ARGS…: enroll this machine's agent
# once; later runs reuse the identity in STATE. A store that was reset (a
# new CA) or an agent state that was deleted means enrolling anew.
enroll_agent() {
	local gc=$1 state=$2 name=$3 log=$4 line pin
	shift 4
	line=$("$gc" join "$@" --json 2>/dev/null | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
	[ -n "$line" ] || die "gridcity join failed"
	pin=${line##*/}
	if [ -f "$state/identity.json" ] && ! grep -q "\"caPin\": \"$pin\"" "$state/identity.json"; then
		say "the coordinator's store is new; enrolling this machine again"
		rm -rf "$state"
	fi
	if [ ! -f "$state/identity.json" ]; then
		say "enrolling this machine's agent as $name…"
		# This machine's old enrollment (if any) belongs to a deleted agent state.
		"$gc" agents revoke "$name" "$@" >/dev/null 2>&1 || true
		"${agent_env[@]}" "$AGENT" enroll --join "$line" --state "$state" --name "$name" >>"$log" 2>&1 || die "the agent could not enroll"
	fi
}

# wait_agent PID HOST:PORT: the agent PID's stream is up on the coordinator
# at HOST:PORT within 30 s.
wait_agent() {
	local _
	for _ in $(seq 1 300); do
		kill -0 "$1" 2>/dev/null || die "the agent stopped"
		http_get "$2" /healthz 2>/dev/null | grep -q '"agentsConnected":[1-9]' && return 0
		sleep 0.1
	done
	die "the agent did not connect within 30 s"
}

# supervise PID…: until Ctrl-C (or a TERM), with the trap setting stopping=1.
# The processes get Ctrl-C's SIGINT themselves and stop cleanly, exit 0; so
# do they when the signal reaches them alone (this script started in the
# background, where SIGINT is ignored and its trap cannot fire). Either way
# that is a stop, not a failure; any other end is, unless the sourcing
# script defines ended PID STATUS and it returns 0 (the process may go).
stopping=0
supervise() {
	local p rc
	local -a left
	local -a watched=("$@")
	while [ "$stopping" = 0 ]; do
		left=()
		for p in "${watched[@]}"; do
			kill -0 "$p" 2>/dev/null && { left+=("$p"); continue; }
			rc=0
			wait "$p" 2>/dev/null || rc=$?
			case "$stopping:$rc" in
			1:* | 0:0 | 0:130 | 0:143) stopping=1 ;;
			*)
				declare -F ended >/dev/null && ended "$p" "$rc" && continue
				die "a process ended unexpectedly (exit status $rc)" ;;
			esac
		done
		watched=("${left[@]}")
		# Ctrl-C interrupts the sleep too; that is no error.
		sleep 0.5 || true
	done
}
