#!/usr/bin/env bash
# make bench: the agent's steady RSS and CPU per sample next to
# prometheus-node-exporter's, measured in the same run on this machine; then
# the latency from a person's approval to a command's result reaching the
# MCP client next to `ssh localhost` running the same command (Debian's
# openssh-server on a loopback port of its own); the coordinator's memory
# and CPU per connected agent and its tools' latency with 1,000 and 10,000
# simulated agents; three replicas on one PostgreSQL: the failover time of
# 1,000 simulated agents when their replica is killed, and each replica's
# memory and CPU per agent with 10,000 spread over the three; every tool's answer size in both forms on a simulated
# fleet of 10,000 servers, beside the sizes before the budgets; and the Go
# benchmarks. Writes bench/report.json and
# bench/report.md and prints the table. A benchmark, not a test: it exits
# non-zero only when something failed to run, never because a figure
# missed its aim.
#
# Environment:
#   BENCH_SECONDS  length of the measured window (default 90; rounded up to
#                  whole 30 s medium intervals)
#   BENCH_WARMUP   at least this many seconds between the agent connecting
#                  and the window (default 15)
#   BENCH_LATENCY_N       measured samples of each command on each side
#                         (default 30)
#   BENCH_LATENCY_WARMUP  samples before those, not counted (default 3)
#   BENCH_AGENTS   fleet sizes for the coordinator's memory and CPU per
#                  connected agent and its tools' latency, with simulated
#                  agents (default "1000 10000 50000"; 0 skips them). A size
#                  over what the hard limit on open files allows (each agent
#                  is a file in the coordinator and one in the driver) is
#                  measured at the largest size it allows, and the report
#                  says so
#   BENCH_AGENTS_SECONDS  that window (default 30)
#   BENCH_AGENTS_SETTLE   seconds between the last agent connecting and the
#                         window (default 15)
#   BENCH_AGENTS_RATE     simulated agents connecting per second (default 50;
#                         150 for the sizes over 10,000)
#   BENCH_AGENTS_CALLS    calls of list_servers and of incident_report at
#                         each size (default 20)
#   BENCH_HA_FAILOVER  simulated agents whose replica is killed, of three on
#                      one PostgreSQL (default 1000; 0 skips it)
#   BENCH_HA_SPREAD    simulated agents spread over three replicas on one
#                      PostgreSQL, next to the single coordinator with as
#                      many in BENCH_AGENTS (default 10000; 0 skips it)
#   BENCH_HA_RATE      agents starting per second over the three (default 150:
#                      50 each, BENCH_AGENTS_RATE's default)
#   BENCH_OUT      where the report goes (default bench)
#   BENCH_KEEP=1   keep the temporary directory with the logs
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_=${BENCH_SECONDS:-90}
WARMUP=${BENCH_WARMUP:-15}
OUT=${BENCH_OUT:-bench}
LAT_N=${BENCH_LATENCY_N:-30}
LAT_WARMUP=${BENCH_LATENCY_WARMUP:-3}
EXPORTER=/usr/bin/prometheus-node-exporter
SSHD=/usr/sbin/sshd

say() { echo "bench: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-bench.XXXXXX")
pids=()
made_run_sshd=0
cleanup() {
  local rc=$?
  # Only the processes this script started, by pid.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local left=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  # The replicas' PostgreSQL, after the replicas (and before waiting for every child).
  if declare -F pg_stop >/dev/null; then pg_stop; fi
  wait 2>/dev/null || true
  pids=()
  # sshd's privilege separation directory, when this script made it.
  if [ "$made_run_sshd" = 1 ]; then rmdir /run/sshd 2>/dev/null || true; fi
  if [ "$rc" != 0 ]; then
    for f in "$tmp"/*.log; do
      [ -s "$f" ] && { echo "--- $f (last lines)" >&2; tail -15 "$f" >&2; }
    done
  fi
  if [ "${BENCH_KEEP:-}" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
  return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The peers: Debian's prometheus-node-exporter and openssh-server. Their
# packages would start services through systemd or invoke-rc.d; we run the
# binaries ourselves, so a policy-rc.d (where none exists) keeps the
# packages from starting any.
missing=()
[ -x "$EXPORTER" ] || missing+=(prometheus-node-exporter)
{ [ -x "$SSHD" ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; } || missing+=(openssh-server openssh-client)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]} (Debian packages)"
  command -v apt-get >/dev/null || { say "apt-get is missing: install ${missing[*]} by hand"; exit 1; }
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; }
  ok=0
  apt_install >"$tmp/apt.log" 2>&1 || { apt-get update -q </dev/null >>"$tmp/apt.log" 2>&1 && apt_install >>"$tmp/apt.log" 2>&1; } || ok=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  if [ "$ok" != 0 ] || [ ! -x "$EXPORTER" ] || [ ! -x "$SSHD" ]; then say "apt-get install ${missing[*]} failed:"; tail -20 "$tmp/apt.log" >&2; exit 1; fi
fi

[ -x bin/gridcity ] && [ -x bin/gridcity-agent ] || { say "building"; make -s build; }

AGENT_SIZES=${BENCH_AGENTS:-1000 10000 50000}
AGENTS_SECONDS=${BENCH_AGENTS_SECONDS:-30}
AGENTS_SETTLE=${BENCH_AGENTS_SETTLE:-15}
AGENTS_RATE=${BENCH_AGENTS_RATE:-50}
AGENTS_CALLS=${BENCH_AGENTS_CALLS:-20}

# The driver, and the agent's Go benchmarks compiled before anything is
# measured, so that compiling never competes with the window.
(cd coordinator && GOWORK=off go build -o "$tmp/gridcity-bench" ./harness/cmd/gridcity-bench)
# A test binary that does not compile costs the Go rows, not the window;
# it still makes the run fail at the end.
gotest=()
failed=0
if grep -qs '^func BenchmarkCollect' agent/internal/collect/*_test.go; then
  if go test -c -o "$tmp/collect.test" ./agent/internal/collect >"$tmp/gotest-build.log" 2>&1; then
    gotest=(-gotest "$tmp/collect.test" -gotest-dir "$ROOT/agent/internal/collect")
  else
    say "the tests of agent/internal/collect do not compile; no Go benchmark rows:"
    cat "$tmp/gotest-build.log" >&2
    gotest=(-gotest-error "the tests of agent/internal/collect did not compile: $(head -c 300 "$tmp/gotest-build.log" | tr '\n' ' ')")
    failed=1
  fi
fi

mapfile -t ports < <("$tmp/gridcity-bench" ports 4)
HTTP=127.0.0.1:${ports[0]}
GRPC=127.0.0.1:${ports[1]}
METRICS=127.0.0.1:${ports[2]}
SSH_PORT=${ports[3]}

wait_port() { # addr pid log
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { say "$3 ended before listening on $1"; return 1; }
    sleep 0.05
  done
  say "nothing listens on $1 after 10 s ($3)"; return 1
}

# The ssh peer: a private sshd on loopback with its own config, host key
# and authorized_keys, logging in this user with a key. It idles through
# the window; it starts first so that a broken sshd costs no window.
# - UsePAM no: Debian's stock config adds PAM session modules, which would
#   only slow ssh down.
# - StrictModes no: the keys sit under /tmp, which is world-writable
#   (sticky) and so fails StrictModes' walk up the path; their directory
#   is this user's, mode 0700.
# - SetEnv SHLVL=1: bash, started by sshd for a command, reads ~/.bashrc
#   when SHLVL is unset; gridcity's /bin/sh -c reads no rc file, and what a
#   machine's .bashrc runs is not ssh's cost (the report says what it would
#   add here).
ssh_dir="$tmp/ssh"
mkdir -m 0700 "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -C gridcity-bench-host -f "$ssh_dir/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C gridcity-bench-client -f "$ssh_dir/client_ed25519"
cp "$ssh_dir/client_ed25519.pub" "$ssh_dir/authorized_keys"
cat >"$ssh_dir/sshd_config" <<SSHD_CONFIG
ListenAddress 127.0.0.1:$SSH_PORT
HostKey $ssh_dir/host_ed25519
PidFile none
AuthorizedKeysFile $ssh_dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
UseDNS no
SetEnv SHLVL=1
SSHD_CONFIG
echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$ssh_dir/host_ed25519.pub")" >"$ssh_dir/known_hosts"
cat >"$ssh_dir/ssh_config" <<SSH_CONFIG
Host *
  UserKnownHostsFile $ssh_dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  IdentitiesOnly yes
SSH_CONFIG
# sshd running as root wants its privilege separation directory, which the
# package leaves to systemd-tmpfiles.
if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -m 0755 /run/sshd && made_run_sshd=1; fi
"$SSHD" -t -f "$ssh_dir/sshd_config" || { say "sshd refused its config"; exit 1; }
"$SSHD" -D -f "$ssh_dir/sshd_config" -E "$tmp/sshd.log" &
sshd_pid=$!
pids+=("$sshd_pid")
wait_port "127.0.0.1:$SSH_PORT" "$sshd_pid" sshd

say "coordinator on $HTTP / $GRPC, node exporter on $METRICS, sshd on 127.0.0.1:$SSH_PORT, data in $tmp"
bin/gridcity serve --data "$tmp/coordinator" --http "$HTTP" --grpc "$GRPC" --advertise "$GRPC" >"$tmp/coordinator.log" 2>&1 &
pids+=($!)
wait_port "$HTTP" "${pids[-1]}" coordinator
wait_port "$GRPC" "${pids[0]}" coordinator

"$EXPORTER" --web.listen-address="$METRICS" >"$tmp/node-exporter.log" 2>&1 &
exporter_pid=$!
pids+=("$exporter_pid")
wait_port "$METRICS" "$exporter_pid" node-exporter

join=$(bin/gridcity join --data "$tmp/coordinator" --json | sed -n 's/.*"joinLine": *"\([^"]*\)".*/\1/p')
[ -n "$join" ] || { say "gridcity join printed no join line"; exit 1; }
bin/gridcity-agent run --state "$tmp/agent" --join "$join" --name bench-agent >"$tmp/agent.log" 2>&1 &
agent_pid=$!
pids+=("$agent_pid")

"$tmp/gridcity-bench" measure -agent-pid "$agent_pid" -agent-log "$tmp/agent.log" \
  -exporter-pid "$exporter_pid" -exporter-url "http://$METRICS/metrics" \
  -seconds "$SECONDS_" -warmup "$WARMUP" -clk-tck "$(getconf CLK_TCK)" -out "$tmp/live.json"

# The command latency, with the same coordinator and agent, after the
# window so that its commands leave the window's figures alone.
latency=(-latency "$tmp/latency.json")
if "$tmp/gridcity-bench" latency -http "$HTTP" -data "$tmp/coordinator" -gridcity bin/gridcity \
  -server bench-agent -agent-state "$tmp/agent" -n "$LAT_N" -warmup "$LAT_WARMUP" \
  -ssh-port "$SSH_PORT" -ssh-key "$ssh_dir/client_ed25519" -ssh-config "$ssh_dir/ssh_config" \
  -ssh-control "$ssh_dir/control" -out "$tmp/latency.json" 2>&1 | tee "$tmp/latency.log" >&2; then
  :
else
  say "the command latency could not be measured; the report says so"
  latency=(-latency-error "$(tail -3 "$tmp/latency.log" | tr '\n' ' ' | head -c 400)")
  failed=1
fi

# Stop everything before the Go benchmarks, which then have the machine.
cleanup_procs() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup_procs

# The coordinator with simulated fleets (gridcity-bench agents): for each
# size a fresh coordinator with its own data directory and ports, measured
# with no agents, then with that many agents enrolled with one reusable join
# line and streaming from one driver process (an mTLS connection each, not a
# process each); then list_servers (without arguments: its first page of
# 200 servers) and incident_report are timed.
agents=()
if [ "$AGENT_SIZES" != 0 ]; then
  # Each agent is an open connection in the coordinator and one in the
  # driver. Go raises its own soft limit to the hard one; the hard one has
  # to be enough, and the soft one is raised here for anything else.
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ "$(ulimit -Sn)" != "$hard" ]; then ulimit -Sn "$hard" || true; fi
  for n in $AGENT_SIZES; do
    rate=$AGENTS_RATE
    if [ -z "${BENCH_AGENTS_RATE:-}" ] && [ "$n" -gt 10000 ]; then rate=150; fi
    if [ "$hard" != unlimited ] && [ "$hard" -lt $((n + 1024)) ] && ulimit -Hn $((n + 1024)) 2>/dev/null; then
      # Root (CAP_SYS_RESOURCE) may raise the hard limit.
      hard=$((n + 1024))
      ulimit -Sn "$hard"
    fi
    if [ "$hard" != unlimited ] && [ "$hard" -lt $((n + 1024)) ]; then
      most=$(( (hard - 1024) / 1000 * 1000 ))
      if [ "$most" -le 10000 ]; then
        say "$n simulated agents need about $((n + 1024)) open files each in the coordinator and the driver; the hard limit is $hard: skipped"
        agents+=(-agents-error "$n agents: the hard limit on open files is $hard (ulimit -Hn), and each agent takes one in the coordinator and one in the driver; raise it (limits.conf, LimitNOFILE=) to measure this size")
        continue
      fi
      say "$n simulated agents need about $((n + 1024)) open files each in the coordinator and the driver; the hard limit is $hard, so $most are measured"
      agents+=(-agents-error "$n agents: not measured here, the hard limit on open files is $hard (ulimit -Hn, which could not be raised here) and each agent takes one in the coordinator and one in the driver; $most, the most it allows, are measured instead. A coordinator for $n agents needs LimitNOFILE=$((n + 1024)) or more")
      n=$most
    fi
    mapfile -t fports < <("$tmp/gridcity-bench" ports 2)
    fleet="$tmp/fleet-$n"
    say "coordinator for $n simulated agents on 127.0.0.1:${fports[0]} / 127.0.0.1:${fports[1]}, data in $fleet"
    bin/gridcity serve --data "$fleet" --http "127.0.0.1:${fports[0]}" --grpc "127.0.0.1:${fports[1]}" \
      --advertise "127.0.0.1:${fports[1]}" >"$tmp/fleet-$n-coordinator.log" 2>&1 &
    fleet_pid=$!
    pids+=("$fleet_pid")
    wait_port "127.0.0.1:${fports[0]}" "$fleet_pid" "coordinator for $n agents"
    wait_port "127.0.0.1:${fports[1]}" "$fleet_pid" "coordinator for $n agents"
    rc=0
    "$tmp/gridcity-bench" agents -n "$n" -pid "$fleet_pid" -data "$fleet" -gridcity bin/gridcity \
      -seconds "$AGENTS_SECONDS" -settle "$AGENTS_SETTLE" -rate "$rate" -calls "$AGENTS_CALLS" \
      -clk-tck "$(getconf CLK_TCK)" -out "$tmp/agents-$n.json" 2>&1 | tee "$tmp/fleet-$n-driver.log" >&2 || rc=$?
    # (grep finds nothing when the driver said only its progress lines.)
    why=$({ grep -v '^gridcity-bench: agents: ' "$tmp/fleet-$n-driver.log" || true; } | tail -3 | tr '\n' ' ' | head -c 800)
    case $rc in
    0) agents+=(-agents "$tmp/agents-$n.json") ;;
    3) # Exit 3: the coordinator did not hold the fleet here; a finding, not
      # a failure to run (gridcity-bench agents says why).
      say "the coordinator did not hold $n simulated agents on this machine; the report says so"
      agents+=(-agents-error "$n agents: $why") ;;
    *)
      say "the coordinator with $n simulated agents could not be measured; the report says so"
      agents+=(-agents-error "$n agents: $why")
      failed=1 ;;
    esac
    cleanup_procs
  done
fi

# Three replicas on one PostgreSQL (Debian's, a cluster of its own in $tmp,
# on loopback, default durability), a fresh database and fresh replicas for
# each measure: failover (every agent on the first replica, which is killed
# with -9; each agent's time until its stream is up on a survivor) and
# spread (the agents round the three; each replica's memory and CPU per
# agent, as for one coordinator above).
HA_FAILOVER=${BENCH_HA_FAILOVER:-1000}
HA_SPREAD=${BENCH_HA_SPREAD:-10000}
HA_RATE=${BENCH_HA_RATE:-150}
ha=()
die() { say "$*"; exit 1; }
# healthy HOST:PORT: /healthz answers ok within 10 s (the port is bound
# before the coordinator has set itself up in the store).
healthy() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3 && grep -q '"status":"ok"' <&3) 2>/dev/null && return 0
    sleep 0.05
  done
  say "$1/healthz did not answer ok within 10 s"; return 1
}
ha_replicas() { # DATABASE: three replicas on it, one after another; ha_args names them for the driver
  local k data
  pg_createdb "$1" "$tmp/ha-postgres.log"
  export GRIDCITY_STORE="postgres://postgres:$(cat "$tmp/ha/pg-password")@127.0.0.1:$pg_port/$1?sslmode=disable"
  # Every replica of a store is given the same unseal key (serve alone reads it).
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/ha/$1.unseal.key")
  export GRIDCITY_UNSEAL_KEY_FILE="$tmp/ha/$1.unseal.key"
  ha_args=()
  for k in 1 2 3; do
    mapfile -t hp < <("$tmp/gridcity-bench" ports 2)
    data="$tmp/ha/$1-c$k"
    bin/gridcity serve --data "$data" --http "127.0.0.1:${hp[0]}" --grpc "127.0.0.1:${hp[1]}" \
      --advertise "127.0.0.1:${hp[1]}" >"$tmp/ha-$1-c$k.log" 2>&1 &
    pids+=($!)
    wait_port "127.0.0.1:${hp[0]}" "${pids[-1]}" "replica $k on $1"
    wait_port "127.0.0.1:${hp[1]}" "${pids[-1]}" "replica $k on $1"
    healthy "127.0.0.1:${hp[0]}"
    ha_args+=(-replica "${pids[-1]},$data,127.0.0.1:${hp[0]}")
  done
}
ha_measure() { # failover|spread N: the driver, its figures in $tmp/ha-KIND.json
  local rc=0 why
  # Failover waits a little before the kill; spread settles and measures as
  # the single coordinator does above, so that the two compare.
  local -a ha_window=(-settle 5)
  [ "$1" = failover ] || ha_window=(-settle "$AGENTS_SETTLE" -seconds "$AGENTS_SECONDS")
  say "three replicas on PostgreSQL: $1 with $2 simulated agents"
  ha_replicas "ha_$1"
  "$tmp/gridcity-bench" "$1" "${ha_args[@]}" -n "$2" -gridcity bin/gridcity -rate "$HA_RATE" \
    "${ha_window[@]}" -clk-tck "$(getconf CLK_TCK)" -out "$tmp/ha-$1.json" 2>&1 | tee "$tmp/ha-$1-driver.log" >&2 || rc=$?
  why=$({ grep -v '^gridcity-bench: agents: ' "$tmp/ha-$1-driver.log" || true; } | tail -3 | tr '\n' ' ' | head -c 800)
  case $rc in
  0) ha+=("-ha-$1" "$tmp/ha-$1.json") ;;
  3) say "the replicas did not hold $2 simulated agents on this machine; the report says so"; ha+=(-ha-error "$1, $2 agents: $why") ;;
  *) say "replicas: $1 could not be measured; the report says so"; ha+=(-ha-error "$1, $2 agents: $why"); failed=1 ;;
  esac
  cleanup_procs
  unset GRIDCITY_STORE GRIDCITY_UNSEAL_KEY_FILE
}
if [ "$HA_FAILOVER" != 0 ] || [ "$HA_SPREAD" != 0 ]; then
  . scripts/lib/postgres.sh
  if ! (pg_find) >/dev/null 2>&1; then
    say "PostgreSQL is not installed (apt-get install postgresql): no replica figures"
    ha+=(-ha-error "PostgreSQL is not installed (apt-get install postgresql)")
  else
    hard=$(ulimit -Hn)
    if [ "$hard" != unlimited ] && [ "$(ulimit -Sn)" != "$hard" ]; then ulimit -Sn "$hard" || true; fi
    pg_find
    mkdir -p "$tmp/ha"
    pg_place "$tmp/ha" "$tmp" "$tmp/ha"
    pg_init "$tmp/ha/pg-password" "$tmp/ha-postgres.log"
    pg_start "$("$tmp/gridcity-bench" ports 1)" "$tmp/ha-postgres.log"
    [ "$HA_FAILOVER" = 0 ] || ha_measure failover "$HA_FAILOVER"
    [ "$HA_SPREAD" = 0 ] || ha_measure spread "$HA_SPREAD"
    pg_stop
  fi
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || true)
[ -n "$commit" ] && [ -n "$(git status --porcelain -- agent proto coordinator 2>/dev/null)" ] && commit="$commit with uncommitted changes in agent/, proto/ or coordinator/"
# The app's fleet pages in a real browser (Debian's Chromium, headless): a
# coordinator holding 1,000 simulated agents, a week of metric history
# seeded into its store for ten of them before it starts; the city map and a
# server's page, each loaded afresh, timed to their data on screen, with the
# bytes received, and the week's history as the page fetches it.
APP_N=${BENCH_APP_N:-1000}
app=()
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ "$APP_N" = 0 ]; then
  :
elif [ -z "$chromium" ]; then
  app+=(-app-error "Chromium is not installed (apt-get install chromium)")
else
  mapfile -t aports < <("$tmp/gridcity-bench" ports 2)
  adata="$tmp/app"
  say "the app's pages: $APP_N simulated agents on 127.0.0.1:${aports[0]} / 127.0.0.1:${aports[1]}, data in $adata"
  rc=0
  "$tmp/gridcity-bench" seed -data "$adata" -servers 10 -days 7 || rc=$?
  if [ "$rc" = 0 ]; then
    bin/gridcity serve --data "$adata" --http "127.0.0.1:${aports[0]}" --grpc "127.0.0.1:${aports[1]}" \
      --advertise "127.0.0.1:${aports[1]}" >"$tmp/app-coordinator.log" 2>&1 &
    app_pid=$!
    pids+=("$app_pid")
    wait_port "127.0.0.1:${aports[0]}" "$app_pid" "coordinator for the app's pages" &&
      healthy "127.0.0.1:${aports[0]}" || rc=$?
  fi
  if [ "$rc" = 0 ]; then
    "$tmp/gridcity-bench" app -n "$APP_N" -data "$adata" -gridcity bin/gridcity -chromium "$chromium" \
      -out "$tmp/app.json" 2>&1 | tee "$tmp/app-driver.log" >&2 || rc=$?
  fi
  if [ "$rc" = 0 ]; then
    app+=(-app "$tmp/app.json")
  else
    say "the app's pages could not be measured; the report says so"
    app+=(-app-error "$({ grep -v '^gridcity-bench: agents: ' "$tmp/app-driver.log" 2>/dev/null || true; } | tail -3 | tr '\n' ' ' | head -c 800)")
    failed=1
  fi
  cleanup_procs
fi

# The graph behind incident_report and get_topology, on a synthetic fleet of
# 10,000 targets and 30,000 links, and the tools' whole path over an MCP
# session (aim: incident_report and get_topology under 20 ms).
graphbench=()
if go test -c -o "$tmp/graph.test" ./coordinator/internal/graph >"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/mcp.test" ./coordinator/internal/mcpserver >>"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/store.test" ./coordinator/internal/store >>"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/command.test" ./coordinator/internal/command >>"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/telemetry.test" ./coordinator/internal/telemetry >>"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/notify.test" ./coordinator/internal/notify >>"$tmp/graph-build.log" 2>&1 &&
  go test -c -o "$tmp/oauth.test" ./coordinator/internal/oauth >>"$tmp/graph-build.log" 2>&1; then
  graphbench=(
    -gobench "$tmp/graph.test|$ROOT/coordinator/internal/graph|^Benchmark(Incidents|IncidentReport|BlastRadius|New|Topology)\$|graph work only, on 10,000 targets and 30,000 links (IncidentReport: New + the report with 25 at-risk each, the tool's graph path; aim under 20 ms)"
    -gobench "$tmp/mcp.test|$ROOT/coordinator/internal/mcpserver|^BenchmarkTools\$|a whole tool call over an in-memory MCP session on 10,000 targets and 30,000 links: graph, report, the SDK's JSON and schema validation, the client's decoding (steady: graph reused; cold: built anew); aim under 20 ms"
    -gobench "$tmp/mcp.test|$ROOT/coordinator/internal/mcpserver|^BenchmarkListServers\$|list_servers' whole path over an in-memory MCP session on 10,000 servers with the state simulated agents send: a page of 200 without arguments, filtered by district, status or name, the last page, and a page of 1000"
    -gobench "$tmp/command.test|$ROOT/coordinator/internal/command|^BenchmarkApprovalToResult\$|from a person's approval to the result reaching the waiting client, for a command the agent ends at once (the coordinators' part): one coordinator on SQLite, next to the client, the approver and the agent's stream on three replicas of one PostgreSQL (hand-off and result by LISTEN/NOTIFY)"
    -gobench "$tmp/store.test|$ROOT/coordinator/internal/store|^BenchmarkAppendMetricsFullHistory\$|one minute's metric buckets of 200 servers (cpu, memory, load, two disks) whose history is full (a day of minutes and a week of quarter hours), pruning included, in the embedded store"
    -gobench "$tmp/mcp.test|$ROOT/coordinator/internal/mcpserver|^BenchmarkReadToolsUnderWrites\$|every read tool, MCP resource and app view on 10,000 servers (1,000 resources, about 40,000 links, half the fleet offline behind one failed database) while a goroutine applies 2,000 CPU/memory changes a second and reconnects one agent a second: each call's median and p95 over the run (aim: median under 20 ms, p95 under 100 ms)"
    -gobench "$tmp/mcp.test|$ROOT/coordinator/internal/mcpserver|^BenchmarkGetMetricsWeek\$|get_metrics' whole path over an in-memory MCP session for one server with a full week of history (cpu, memory, load, four disks) in the embedded store: the default hour, a day, the week; with its answer's size in both forms"
    -gobench "$tmp/mcp.test|$ROOT/coordinator/internal/mcpserver|^BenchmarkToolAnswerSizes\$|each tool's answer, in characters of text and of structured content, over an in-memory MCP session on a simulated fleet of 10,000 servers with 1,000 resources, 30,000 links, 2,000 attack sources and 200 failed units (a root cause explaining 5,000 targets): without arguments and with arguments that ask for more"
    -gobench "$tmp/notify.test|$ROOT/coordinator/internal/notify|^BenchmarkApprovalWithDeadReceiver\$|a command asked and approved up to its dispatch on one coordinator on SQLite: with no notifier, and with notifiers whose receivers take the connection and never answer (the webhook alone; a webhook, Slack, ntfy and SMTP together); telling people must not slow an approval"
    -gobench "$tmp/oauth.test|$ROOT/coordinator/internal/oauth|^BenchmarkVerify\$|the check of a bearer token on every MCP call, in the embedded store: an OAuth access token (hash lookup, client, audience, expiry) next to a static token (the bearer package's verifier)"
    -gobench "$tmp/telemetry.test|$ROOT/coordinator/internal/telemetry|^BenchmarkFleetScrape\$|a scrape of /metrics/fleet on 10,000 servers (four disks each, a tenth offline, 1,000 resources): the whole fleet plain and gzipped as Prometheus asks for it, and one district of 500; the body's size and series"
  )
else
  cat "$tmp/graph-build.log" >&2
fi
"$tmp/gridcity-bench" report -live "$tmp/live.json" "${latency[@]}" "${agents[@]}" "${ha[@]}" "${app[@]}" "${gotest[@]}" "${graphbench[@]}" -commit "$commit" -out "$OUT"
exit "$failed"
