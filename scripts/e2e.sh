#!/usr/bin/env bash
# make e2e: the real binaries against each other on loopback, real MCP
# clients (the Go SDK; the TypeScript SDK 1.x and v2 clients, the Inspector
# CLI and the conformance suite, pinned in coordinator/e2e/tsclient; mcp-go,
# a test-only module in coordinator/e2e/mcpgoclient), ACME against Let's Encrypt's pebble (built from
# the test-only module coordinator/e2e/pebble, on loopback), the installers and the packages. Parts that need root
# say so and are skipped when not root; CI runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"

echo "== e2e: coordinator and agents over mTLS, MCP clients"
go test -race -count=1 -timeout 15m ./coordinator/e2e/...

if [ "$(id -u)" -eq 0 ]; then
  echo "== e2e: installers (deploy/test-install.sh)"
  bash deploy/test-install.sh
  echo "== e2e: packages (deploy/test-package.sh)"
  bash deploy/test-package.sh
else
  echo "== e2e: SKIPPED deploy/test-install.sh: it installs into a temporary root and needs root; run make e2e as root"
  echo "== e2e: SKIPPED deploy/test-package.sh: it installs the .deb packages with dpkg and needs root; run make e2e as root"
fi
