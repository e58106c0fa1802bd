#!/usr/bin/env bash
# Installs the pinned TypeScript MCP SDK client (package-lock.json) into
# node_modules/ here. Idempotent and quiet: skips the install when
# node_modules already matches the lock file.
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "tsclient/install.sh: $tool not found; install Node.js 20+ and npm" >&2; exit 1; }
done
stamp=node_modules/.tsclient-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" > "$stamp"
