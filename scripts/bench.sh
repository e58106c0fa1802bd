#!/usr/bin/env bash
# make bench: the agent's steady RSS and CPU per sample next to
# prometheus-node-exporter's, measured in the same run on this machine, plus
# the agent's Go benchmarks; writes bench/report.json and bench/report.md
# and prints the table. A benchmark, not a test: it exits non-zero only when
# something failed to run, never because a figure missed its aim.
#
# Environment:
#   BENCH_SECONDS  length of the measured window (default 90; rounded up to
#                  whole 30 s medium intervals)
#   BENCH_WARMUP   at least this many seconds between the agent connecting
#                  and the window (default 15)
#   BENCH_OUT      where the report goes (default bench)
#   BENCH_KEEP=1   keep the temporary directory with the logs
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_=${BENCH_SECONDS:-90}
WARMUP=${BENCH_WARMUP:-15}
OUT=${BENCH_OUT:-bench}
EXPORTER=/usr/bin/prometheus-node-exporter

say() { echo "bench: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-bench.XXXXXX")
pids=()
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
  wait 2>/dev/null || true
  pids=()
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

# The peer: Debian's prometheus-node-exporter. Its package would start a
# service through systemd or invoke-rc.d; we run the binary ourselves, so a
# policy-rc.d (where none exists) keeps the package from starting one.
if [ ! -x "$EXPORTER" ]; then
  say "installing prometheus-node-exporter (Debian package)"
  command -v apt-get >/dev/null || { say "apt-get is missing: install prometheus-node-exporter by hand"; exit 1; }
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get install -y -q --no-install-recommends prometheus-node-exporter </dev/null; }
  ok=0
  apt_install >"$tmp/apt.log" 2>&1 || { apt-get update -q </dev/null >>"$tmp/apt.log" 2>&1 && apt_install >>"$tmp/apt.log" 2>&1; } || ok=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  if [ "$ok" != 0 ] || [ ! -x "$EXPORTER" ]; then say "apt-get install prometheus-node-exporter failed:"; tail -20 "$tmp/apt.log" >&2; exit 1; fi
fi

[ -x bin/gridcity ] && [ -x bin/gridcity-agent ] || { say "building"; make -s build; }

# The driver, and the agent's Go benchmarks compiled before anything is
# measured, so that compiling never competes with the window.
go build -o "$tmp/gridcity-bench" ./coordinator/cmd/gridcity-bench
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

mapfile -t ports < <("$tmp/gridcity-bench" ports 3)
HTTP=127.0.0.1:${ports[0]}
GRPC=127.0.0.1:${ports[1]}
METRICS=127.0.0.1:${ports[2]}

wait_port() { # addr pid log
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { say "$3 ended before listening on $1"; return 1; }
    sleep 0.05
  done
  say "nothing listens on $1 after 10 s ($3)"; return 1
}

say "coordinator on $HTTP / $GRPC, node exporter on $METRICS, data in $tmp"
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

# Stop everything before the Go benchmarks, which then have the machine.
cleanup_procs() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup_procs

commit=$(git rev-parse --short HEAD 2>/dev/null || true)
[ -n "$commit" ] && [ -n "$(git status --porcelain -- agent proto 2>/dev/null)" ] && commit="$commit with uncommitted changes in agent/ or proto/"
"$tmp/gridcity-bench" report -live "$tmp/live.json" "${gotest[@]}" -commit "$commit" -out "$OUT"
exit "$failed"
