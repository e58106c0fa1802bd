#!/usr/bin/env bash
# test-install.sh — exercises deploy/install-coordinator.sh and deploy/install-agent.sh into a
# temporary root on this machine, without systemd, and checks that the installed agent shows
# up online through the installed coordinator's MCP endpoint.
#
#   make build && sudo bash deploy/test-install.sh
#
# Needs root (the installers refuse to run otherwise; without root the test is skipped), the
# binaries in bin/ (it builds nothing), curl, and free loopback ports (14600/14601 unless
# taken; GRIDCITY_TEST_HTTP_PORT / GRIDCITY_TEST_GRPC_PORT choose others). It touches nothing
# outside its temporary root: the coordinator runs as `nobody` (GRIDCITY_USER=nobody), so no
# user is created; all network traffic stays on 127.0.0.1. GRIDCITY_TEST_KEEP=1 keeps the
# temporary root for inspection.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "test-install: SKIP: must run as root (the installers write system paths and refuse otherwise): sudo bash $0"
	exit 0
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPLOY=$ROOT/deploy
BIN=$ROOT/bin

step() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
fail() {
	printf '\ntest-install: FAIL: %s\n' "$*" >&2
	exit 1
}

for b in gridcity gridcity-agent; do
	[ -x "$BIN/$b" ] || fail "$BIN/$b is missing: run \`make build\` first (this test builds nothing)"
done
command -v curl >/dev/null || fail "curl is needed for the MCP check: apt-get install -y curl"
command -v runuser >/dev/null || fail "runuser (util-linux) is needed to run the coordinator as nobody"

T=$(mktemp -d /tmp/gridcity-test-install.XXXXXX)
chmod 0755 "$T" # the coordinator runs as nobody and must reach its data directory
LOGS=$T/logs
mkdir -p "$LOGS"
pgids=()

cleanup() {
	rc=$?
	set +e
	for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null; done
	for g in "${pgids[@]}"; do
		for _ in $(seq 1 50); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$g" 2>/dev/null
	done
	if [ "$rc" -ne 0 ]; then
		for f in "$LOGS"/*.log; do
			[ -s "$f" ] || continue
			printf '\n--- %s (last 30 lines)\n' "$f" >&2
			tail -n 30 "$f" >&2
		done
	fi
	if [ "${GRIDCITY_TEST_KEEP:-}" = 1 ]; then
		echo "test-install: kept $T"
	else
		rm -rf "$T"
	fi
	if [ "$rc" -eq 0 ]; then echo "test-install: PASS"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The installers' environment: everything under $T.
PREFIX=$T/usr/local/bin
ETC=$T/etc/gridcity
DATA=$T/var/lib/gridcity
STATE=$T/var/lib/gridcity-agent
UNITS=$T/etc/systemd/system
SVC_USER=nobody
inst_env=(env GRIDCITY_PREFIX="$PREFIX" GRIDCITY_ETC="$ETC" GRIDCITY_DATA="$DATA"
	GRIDCITY_STATE="$STATE" GRIDCITY_UNIT_DIR="$UNITS" GRIDCITY_USER="$SVC_USER")

# start NAME COMMAND: run a shell command in its own process group (so that cleanup stops it
# and everything it started), logging to $LOGS/NAME.log.
start() {
	setsid bash -c "$2" >"$LOGS/$1.log" 2>&1 </dev/null &
	pgids+=("$!")
	agent_pg=$! # the last one started
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
mode_of() { stat -c %a "$1"; }
assert_mode() { [ "$(mode_of "$1")" = "$2" ] || fail "$1 has mode $(mode_of "$1"), want $2"; }
assert_grep() { grep -q -- "$1" "$2" || fail "$2 does not contain \"$1\""; }
# the command an installer printed for starting by hand: the indented line after "by hand".
printed_command() { sed -n '/by hand/{n;n;s/^  //p;q}' "$1"; }

HP=${GRIDCITY_TEST_HTTP_PORT:-14600}
GP=${GRIDCITY_TEST_GRPC_PORT:-14601}
if [ -z "${GRIDCITY_TEST_HTTP_PORT:-}${GRIDCITY_TEST_GRPC_PORT:-}" ]; then
	for _ in $(seq 1 20); do
		if port_free "$HP" && port_free "$GP"; then break; fi
		HP=$((HP + 10)) GP=$((GP + 10))
	done
fi
port_free "$HP" || fail "port $HP is taken (set GRIDCITY_TEST_HTTP_PORT)"
port_free "$GP" || fail "port $GP is taken (set GRIDCITY_TEST_GRPC_PORT)"
echo "test-install: temporary root $T, coordinator on 127.0.0.1:$HP (HTTP) and 127.0.0.1:$GP (gRPC)"

step "the installers refuse to run without root"
for s in install-coordinator.sh install-agent.sh; do
	if out=$(runuser -u nobody -- bash -s -- x <"$DEPLOY/$s" 2>&1); then
		fail "$s ran as nobody"
	fi
	case $out in *"must run as root"*) ok "$s: $out" ;; *) fail "$s as nobody said: $out" ;; esac
done

step "install-coordinator.sh into the temporary root (no systemd)"
"${inst_env[@]}" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" \
	--http "127.0.0.1:$HP" --grpc "127.0.0.1:$GP" --advertise "127.0.0.1:$GP" --no-start \
	>"$LOGS/install-coordinator.out" 2>&1 || { cat "$LOGS/install-coordinator.out"; fail "install-coordinator.sh failed"; }
cat "$LOGS/install-coordinator.out"
assert_mode "$PREFIX/gridcity" 755
cmp -s "$BIN/gridcity" "$PREFIX/gridcity" || fail "installed gridcity differs from bin/gridcity"
assert_grep "GRIDCITY_HTTP=127.0.0.1:$HP" "$ETC/coordinator.env"
assert_grep "GRIDCITY_GRPC=127.0.0.1:$GP" "$ETC/coordinator.env"
assert_grep "GRIDCITY_ADVERTISE=127.0.0.1:$GP" "$ETC/coordinator.env"
assert_grep "ExecStart=$PREFIX/gridcity serve --data $DATA" "$UNITS/gridcity.service"
assert_grep "EnvironmentFile=-$ETC/coordinator.env" "$UNITS/gridcity.service"
assert_mode "$ETC/coordinator.env" 600
assert_grep "User=$SVC_USER" "$UNITS/gridcity.service"
assert_grep "ReadWritePaths=$DATA" "$UNITS/gridcity.service"
assert_mode "$DATA" 700
[ "$(stat -c %U "$DATA")" = "$SVC_USER" ] || fail "$DATA is owned by $(stat -c %U "$DATA"), want $SVC_USER"
assert_grep "join --data $DATA" "$LOGS/install-coordinator.out"
assert_grep "mcp --data $DATA" "$LOGS/install-coordinator.out"
coord_cmd=$(printed_command "$LOGS/install-coordinator.out")
[ -n "$coord_cmd" ] || fail "install-coordinator.sh printed no command to start the coordinator by hand"
ok "installed; start by hand with: $coord_cmd"

step "install-coordinator.sh again, without flags: the settings stay"
sum=$(cat "$ETC/coordinator.env" "$UNITS/gridcity.service" | cksum)
"${inst_env[@]}" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start \
	>"$LOGS/install-coordinator-2.out" 2>&1 || { cat "$LOGS/install-coordinator-2.out"; fail "re-running install-coordinator.sh failed"; }
[ "$(cat "$ETC/coordinator.env" "$UNITS/gridcity.service" | cksum)" = "$sum" ] || fail "re-running changed coordinator.env or the unit"
ok "coordinator.env and the unit unchanged"

step "install-coordinator.sh with GRIDCITY_STORE: the URL goes into coordinator.env, root's alone"
# Beside the installation above (its own etc, data and unit), so that it keeps its SQLite store.
ETC2=$T/etc2/gridcity
mkdir -p "$ETC2"
printf 'GRIDCITY_LOG_LEVEL=info\n' >"$ETC2/coordinator.env"
chmod 0644 "$ETC2/coordinator.env" # as an earlier installer left it
inst2=("${inst_env[@]}" GRIDCITY_ETC="$ETC2" GRIDCITY_DATA="$T/var/lib/gridcity2" GRIDCITY_UNIT_DIR="$T/etc2/systemd")
url="postgres://gridcity:pa%27ss@db.example.com:5432/gridcity?sslmode=verify-full&pool_max_conns=20"
if out=$("${inst2[@]}" GRIDCITY_STORE="mysql://x@db/gridcity" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start 2>&1); then
	fail "install-coordinator.sh took GRIDCITY_STORE=mysql://…"
fi
case $out in *"want postgres://"*) ok "a URL that is not postgres:// is refused: $out" ;; *) fail "GRIDCITY_STORE=mysql://… said: $out" ;; esac
if out=$("${inst2[@]}" GRIDCITY_STORE="$url" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start 2>&1); then
	fail "install-coordinator.sh took GRIDCITY_STORE without an unseal key"
fi
case $out in *"needs the unseal key"*"openssl rand -hex 32"*) ok "a replica without an unseal key is refused, saying how to make one" ;; *) fail "GRIDCITY_STORE without a key said: $out" ;; esac
key=$T/unseal.key
printf 'zz%.0s' $(seq 1 32) >"$key"
if out=$("${inst2[@]}" GRIDCITY_STORE="$url" GRIDCITY_UNSEAL_KEY_FILE="$key" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start 2>&1); then
	fail "install-coordinator.sh took an unseal key file that is not 64 hex digits"
fi
case $out in *"does not hold an unseal key (64 hex digits)"*) ok "a key file that is not 64 hex digits is refused" ;; *) fail "a bad key file said: $out" ;; esac
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$key")
"${inst2[@]}" GRIDCITY_STORE="$url" GRIDCITY_UNSEAL_KEY_FILE="$key" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start \
	>"$LOGS/install-coordinator-store.out" 2>&1 || { cat "$LOGS/install-coordinator-store.out"; fail "install-coordinator.sh with GRIDCITY_STORE failed"; }
assert_mode "$ETC2/unseal.key" 600
[ "$(stat -c %U "$ETC2/unseal.key")" = "$SVC_USER" ] || fail "$ETC2/unseal.key is owned by $(stat -c %U "$ETC2/unseal.key"), want $SVC_USER"
cmp -s "$key" "$ETC2/unseal.key" || fail "$ETC2/unseal.key is not the key given"
! grep -qF "$(cat "$key")" "$LOGS/install-coordinator-store.out" || fail "install-coordinator.sh printed the unseal key"
[ "$(sh -c '. "$1"; printf %s "$GRIDCITY_UNSEAL_KEY_FILE"' sh "$ETC2/coordinator.env")" = "$ETC2/unseal.key" ] || fail "coordinator.env does not name the unseal key: $(cat "$ETC2/coordinator.env")"
ok "the unseal key installed as $ETC2/unseal.key, $SVC_USER's alone (0600), named in coordinator.env"
assert_mode "$ETC2/coordinator.env" 600
[ "$(stat -c %U "$ETC2/coordinator.env")" = root ] || fail "$ETC2/coordinator.env is owned by $(stat -c %U "$ETC2/coordinator.env"), want root"
assert_grep "GRIDCITY_LOG_LEVEL=info" "$ETC2/coordinator.env"
[ "$(sh -c '. "$1"; printf %s "$GRIDCITY_STORE"' sh "$ETC2/coordinator.env")" = "$url" ] || fail "sourcing $ETC2/coordinator.env does not give GRIDCITY_STORE=$url: $(cat "$ETC2/coordinator.env")"
! grep -q "pa%27ss" "$LOGS/install-coordinator-store.out" || fail "install-coordinator.sh printed the store's password"
assert_grep "sudo sh -c 'set -a; . $ETC2/coordinator.env; set +a; exec runuser -u $SVC_USER -- $PREFIX/gridcity join --data $T/var/lib/gridcity2'" "$LOGS/install-coordinator-store.out"
"${inst2[@]}" bash "$DEPLOY/install-coordinator.sh" --binary "$BIN/gridcity" --no-start >"$LOGS/install-coordinator-store-2.out" 2>&1 ||
	{ cat "$LOGS/install-coordinator-store-2.out"; fail "re-running install-coordinator.sh on a replica, without GRIDCITY_STORE or a key, failed"; }
ok "GRIDCITY_STORE written quoted, the file 0600 root's; the CLI lines read it as root; a re-run keeps the store and the key"

if command -v systemd-analyze >/dev/null 2>&1; then
	step "systemd-analyze verify on the installed coordinator unit"
	systemd-analyze verify "$UNITS/gridcity.service" >"$LOGS/verify.log" 2>&1 || { cat "$LOGS/verify.log"; fail "systemd-analyze verify failed"; }
	# The one expected remark is about this test's choice of user; a real install has gridcity.
	if grep -v "Special user $SVC_USER configured" "$LOGS/verify.log"; then fail "systemd-analyze verify complained"; fi
	ok "no complaints"
else
	step "systemd-analyze is not installed: unit verification skipped"
fi

step "start the coordinator by hand, as printed"
start coordinator "$coord_cmd"
for _ in $(seq 1 100); do
	curl -fsS --max-time 1 "http://127.0.0.1:$HP/healthz" >/dev/null 2>&1 && break
	kill -0 -- "-${pgids[0]}" 2>/dev/null || fail "the coordinator exited"
	sleep 0.1
done
curl -fsS --max-time 2 "http://127.0.0.1:$HP/healthz" >/dev/null || fail "the coordinator did not answer /healthz on 127.0.0.1:$HP"
ps -o user= -p "$(pgrep -g "${pgids[0]}" -x gridcity | head -n 1)" | grep -qx "$SVC_USER" || fail "the coordinator does not run as $SVC_USER"
ok "healthy, running as $SVC_USER"

as_svc() { runuser -u "$SVC_USER" -- "$@"; }
join_json=$(as_svc "$PREFIX/gridcity" join --data "$DATA" --json) || fail "gridcity join failed"
LINE=$(printf '%s\n' "$join_json" | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
PIN=$(printf '%s\n' "$join_json" | sed -n 's/.*"caPin": *"\([^"]*\)".*/\1/p')
case $LINE in "gridcity://127.0.0.1:$GP/"*) ok "join line $LINE" ;; *) fail "unexpected join line: $join_json" ;; esac

nothing_installed() {
	for p in "$PREFIX/gridcity-agent" "$ETC/agent.yaml" "$STATE" "$UNITS/gridcity-agent.service"; do
		[ ! -e "$p" ] || fail "$1 left $p behind"
	done
}
step "install-agent.sh with bad join lines fails clearly and installs nothing"
bad_lines=(
	"garbage|a join line looks like"
	"gridcity://127.0.0.1:$GP/not-a-token/$PIN|join token unknown"
	"gridcity://127.0.0.1:$GP/token/sha256:$(printf '0%.0s' $(seq 1 64))|presented no CA matching"
	"gridcity://127.0.0.1:1/token/$PIN|cannot reach the coordinator"
)
for entry in "${bad_lines[@]}"; do
	bad=${entry%|*} want=${entry##*|}
	if "${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "$bad" --binary "$BIN/gridcity-agent" >"$LOGS/bad.out" 2>&1; then
		cat "$LOGS/bad.out"
		fail "install-agent.sh accepted the join line $bad"
	fi
	grep -q -- "$want" "$LOGS/bad.out" || { cat "$LOGS/bad.out"; fail "for $bad, expected the message to say \"$want\""; }
	grep -q "nothing was installed" "$LOGS/bad.out" || { cat "$LOGS/bad.out"; fail "for $bad, no \"nothing was installed\""; }
	nothing_installed "the join line $bad"
	ok "$bad: $(grep -m1 -- "$want" "$LOGS/bad.out")"
done
if "${inst_env[@]}" bash "$DEPLOY/install-agent.sh" --binary "$BIN/gridcity-agent" >"$LOGS/bad.out" 2>&1; then
	fail "install-agent.sh without a join line succeeded on a fresh host"
fi
assert_grep "give the join line" "$LOGS/bad.out"
nothing_installed "a missing join line"
ok "no join line: $(grep -m1 'give the join line' "$LOGS/bad.out")"

step "install-agent.sh with the join line"
"${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "$LINE" --name test-install-agent --binary "$BIN/gridcity-agent" \
	>"$LOGS/install-agent.out" 2>&1 || { cat "$LOGS/install-agent.out"; fail "install-agent.sh failed"; }
cat "$LOGS/install-agent.out"
[ -f "$STATE/identity.json" ] || fail "no $STATE/identity.json"
assert_mode "$STATE/identity.json" 600
assert_mode "$STATE" 700
assert_mode "$PREFIX/gridcity-agent" 755
assert_grep 'name: "test-install-agent"' "$ETC/agent.yaml"
assert_grep "runAs: root" "$ETC/agent.yaml"
assert_grep "commands: true" "$ETC/agent.yaml"
assert_grep "ExecStart=$PREFIX/gridcity-agent run --state $STATE --config $ETC/agent.yaml" "$UNITS/gridcity-agent.service"
assert_grep "^ConditionPathExists=$STATE/identity.json$" "$UNITS/gridcity-agent.service"
agent_cmd=$(printed_command "$LOGS/install-agent.out")
[ "$agent_cmd" = "$PREFIX/gridcity-agent run --state $STATE --config $ETC/agent.yaml" ] ||
	fail "install-agent.sh printed \"$agent_cmd\" as the command to start the agent by hand"
ok "identity.json 0600 in a 0700 state directory; agent.yaml and the unit written"

if command -v systemd-analyze >/dev/null 2>&1; then
	systemd-analyze verify "$UNITS/gridcity-agent.service" >"$LOGS/verify.log" 2>&1 || { cat "$LOGS/verify.log"; fail "systemd-analyze verify failed on the agent unit"; }
	[ ! -s "$LOGS/verify.log" ] || { cat "$LOGS/verify.log"; fail "systemd-analyze verify complained about the agent unit"; }
	ok "systemd-analyze verify: no complaints about the agent unit"
fi

step "install-agent.sh again with the same line (the single-use token is spent): already enrolled"
id_sum=$(cksum <"$STATE/identity.json")
"${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "$LINE" --binary "$BIN/gridcity-agent" \
	>"$LOGS/install-agent-2.out" 2>&1 || { cat "$LOGS/install-agent-2.out"; fail "re-running install-agent.sh failed"; }
assert_grep "already enrolled" "$LOGS/install-agent-2.out"
[ "$(cksum <"$STATE/identity.json")" = "$id_sum" ] || fail "re-running replaced identity.json"
ok "$(grep -m1 'already enrolled' "$LOGS/install-agent-2.out")"

step "install-agent.sh without the line once enrolled (an upgrade): fine, and agent.env's old names are renamed"
# An agent.env written for an agent that read GRIDCITY_<FLAG> (the coordinator's names).
printf '# operator settings\nGRIDCITY_LOG_LEVEL=debug\nGRIDCITY_NAME=old\nGRIDCITY_AGENT_NAME=test-install-agent\n' >"$ETC/agent.env"
chmod 0600 "$ETC/agent.env"
"${inst_env[@]}" bash "$DEPLOY/install-agent.sh" --binary "$BIN/gridcity-agent" \
	>"$LOGS/install-agent-3.out" 2>&1 || { cat "$LOGS/install-agent-3.out"; fail "install-agent.sh without a line failed once enrolled"; }
[ "$(cksum <"$STATE/identity.json")" = "$id_sum" ] || fail "the upgrade replaced identity.json"
assert_grep "renamed GRIDCITY_LOG_LEVEL GRIDCITY_NAME in $ETC/agent.env" "$LOGS/install-agent-3.out"
assert_grep "^GRIDCITY_AGENT_LOG_LEVEL=debug$" "$ETC/agent.env"
assert_grep "^# GRIDCITY_NAME=old .*ignored: GRIDCITY_AGENT_NAME is set" "$ETC/agent.env"
assert_grep "^# operator settings$" "$ETC/agent.env"
! grep -q "^GRIDCITY_LOG_LEVEL\|^GRIDCITY_NAME" "$ETC/agent.env" || fail "$ETC/agent.env still sets an old name: $(cat "$ETC/agent.env")"
assert_grep "^GRIDCITY_LOG_LEVEL=debug$" "$ETC/agent.env.old"
assert_mode "$ETC/agent.env" 600
env_sum=$(cksum <"$ETC/agent.env")
"${inst_env[@]}" bash "$DEPLOY/install-agent.sh" --binary "$BIN/gridcity-agent" \
	>"$LOGS/install-agent-3b.out" 2>&1 || { cat "$LOGS/install-agent-3b.out"; fail "re-running install-agent.sh failed"; }
[ "$(cksum <"$ETC/agent.env")" = "$env_sum" ] || fail "a second run changed agent.env again"
! grep -q "renamed" "$LOGS/install-agent-3b.out" || fail "a second run renamed again: $(cat "$LOGS/install-agent-3b.out")"
! grep -q "is set but ignored" "$LOGS/install-agent-3.out" "$LOGS/install-agent-3b.out" || fail "the agent warned about the installer's own GRIDCITY_STATE"
ok "identity kept; $(grep -m1 renamed "$LOGS/install-agent-3.out")"

step "install-agent.sh with a garbage line once enrolled: fails, the installation stays"
if "${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "gridcity://garbage" --binary "$BIN/gridcity-agent" >"$LOGS/bad.out" 2>&1; then
	fail "install-agent.sh accepted a garbage line"
fi
assert_grep "a join line looks like" "$LOGS/bad.out"
assert_grep "left as it was" "$LOGS/bad.out"
[ "$(cksum <"$STATE/identity.json")" = "$id_sum" ] || fail "a garbage line changed identity.json"
ok "$(grep -m1 'left as it was' "$LOGS/bad.out")"

step "start the installed agent by hand, as printed, with a coordinator's setting in its environment; list_servers shows it online"
# GRIDCITY_CONFIG is the coordinator's: the agent must not load it (it would refuse a city config).
printf 'districts: []\n' >"$T/city.yaml"
start agent "GRIDCITY_CONFIG=$T/city.yaml GRIDCITY_LOG_LEVEL=debug $agent_cmd"
mcp_json=$(as_svc "$PREFIX/gridcity" mcp --data "$DATA" --json) || fail "gridcity mcp --json failed"
ENDPOINT=$(printf '%s\n' "$mcp_json" | sed -n 's/.*"endpoint": *"\([^"]*\)".*/\1/p')
TOKEN=$(printf '%s\n' "$mcp_json" | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
[ "$ENDPOINT" = "http://127.0.0.1:$HP/mcp" ] || fail "gridcity mcp --json gave endpoint \"$ENDPOINT\": $mcp_json"
[ -n "$TOKEN" ] || fail "gridcity mcp --json gave no token: $mcp_json"

# mcp_post BODY [SESSION]: one JSON-RPC message; prints the response body (SSE or JSON).
mcp_post() {
	curl -sS --max-time 10 -D "$T/headers" \
		-H "Authorization: Bearer $TOKEN" -H "X-Agent-Client: test-install" \
		-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream" \
		${2:+-H "Mcp-Session-Id: $2"} -d "$1" "$ENDPOINT"
}
init=$(mcp_post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-install","version":"1"}}}') ||
	fail "MCP initialize failed"
printf '%s' "$init" | grep -q '"serverInfo"' || fail "MCP initialize: unexpected answer: $init"
SESSION=$(tr -d '\r' <"$T/headers" | sed -n 's/^[Mm][Cc][Pp]-[Ss][Ee][Ss][Ss][Ii][Oo][Nn]-[Ii][Dd]: *//p')
[ -n "$SESSION" ] || fail "MCP initialize returned no Mcp-Session-Id header"
mcp_post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$SESSION" >/dev/null || fail "MCP notifications/initialized failed"
# wait_online: list_servers until test-install-agent is online (30 s), while the agent runs.
rpc_id=1
wait_online() {
	local data="" status sc resp
	for _ in $(seq 1 60); do
		rpc_id=$((rpc_id + 1))
		resp=$(mcp_post "{\"jsonrpc\":\"2.0\",\"id\":$rpc_id,\"method\":\"tools/call\",\"params\":{\"name\":\"list_servers\",\"arguments\":{}}}" "$SESSION") ||
			fail "MCP tools/call list_servers failed"
		data=$(printf '%s\n' "$resp" | sed -n 's/^data: //p')
		[ -n "$data" ] || data=$resp # a JSON (not SSE) answer
		if printf '%s' "$data" | grep -q '"isError":true'; then fail "list_servers returned an error: $data"; fi
		if command -v jq >/dev/null 2>&1; then
			status=$(printf '%s' "$data" | jq -r '(.result.structuredContent.rows // .result.structuredContent.servers // [])[] | select(.name == "test-install-agent") | .status')
		else
			# Without jq: this coordinator knows one server only, so its name and an "online"
			# status (container states are never "online") in structuredContent say enough.
			sc=$(printf '%s' "$data" | grep -o '"structuredContent":.*' || true)
			status=""
			case $sc in *'"name":"test-install-agent"'*'"status":"online"'* | *'"status":"online"'*'"name":"test-install-agent"'*) status=online ;; esac
		fi
		[ "$status" != online ] || return 0
		kill -0 -- "-$agent_pg" 2>/dev/null || fail "the agent exited"
		sleep 0.5
	done
	fail "list_servers never showed test-install-agent online; last answer: $data"
}
wait_online
assert_grep "GRIDCITY_LOG_LEVEL is set but ignored.*GRIDCITY_AGENT_LOG_LEVEL" "$LOGS/agent.log"
! grep -q "GRIDCITY_CONFIG" "$LOGS/agent.log" || fail "the agent warned about GRIDCITY_CONFIG although --config is given"
ok "list_servers: test-install-agent is online; the agent warned that it ignores GRIDCITY_LOG_LEVEL"

step "after \`gridcity agents revoke\`, install-agent.sh --reenroll with a new line replaces the identity"
as_svc "$PREFIX/gridcity" agents revoke test-install-agent --data "$DATA" >/dev/null || fail "gridcity agents revoke failed"
LINE2=$(as_svc "$PREFIX/gridcity" join --data "$DATA" --json | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
[ -n "$LINE2" ] || fail "gridcity join gave no second join line"
if "${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "gridcity://garbage" --reenroll --binary "$BIN/gridcity-agent" >"$LOGS/bad.out" 2>&1; then
	fail "install-agent.sh --reenroll accepted a garbage line"
fi
[ "$(cksum <"$STATE/identity.json")" = "$id_sum" ] || fail "a failed --reenroll changed identity.json"
"${inst_env[@]}" bash "$DEPLOY/install-agent.sh" "$LINE2" --reenroll --binary "$BIN/gridcity-agent" \
	>"$LOGS/install-agent-4.out" 2>&1 || { cat "$LOGS/install-agent-4.out"; fail "install-agent.sh --reenroll failed"; }
assert_grep "replaced the previous identity" "$LOGS/install-agent-4.out"
[ "$(cksum <"$STATE/identity.json")" != "$id_sum" ] || fail "--reenroll kept the revoked identity"
assert_mode "$STATE/identity.json" 600
leftover=$(find "$(dirname "$STATE")" -maxdepth 1 -name '.gridcity-agent-enroll.*')
[ -z "$leftover" ] || fail "--reenroll left $leftover behind"
kill -TERM -- "-$agent_pg" 2>/dev/null || true
start agent-reenrolled "$agent_cmd"
# Wait for the new stream itself: the server may still show online from the old one.
for _ in $(seq 1 100); do
	grep -q "connected to the coordinator" "$LOGS/agent-reenrolled.log" && break
	kill -0 -- "-$agent_pg" 2>/dev/null || fail "the re-enrolled agent exited"
	sleep 0.2
done
assert_grep "connected to the coordinator" "$LOGS/agent-reenrolled.log"
wait_online
ok "new identity; the restarted agent is online again"

step "nothing in the data directory belongs to root"
stray=$(find "$DATA" ! -user "$SVC_USER" -print)
[ -z "$stray" ] || fail "files in $DATA not owned by $SVC_USER (the CLI ran as the wrong user, or the coordinator wrote as root): $stray"
ok "all of $DATA belongs to $SVC_USER"
