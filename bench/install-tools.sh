#!/bin/sh
# Installs what bench/run.mjs needs beyond Node and npm packages: wrk (the closed-loop load
# generator) and taskset (util-linux, normally present). Idempotent; Debian/Ubuntu only.
set -eu
if command -v wrk >/dev/null 2>&1 && command -v taskset >/dev/null 2>&1; then
  exit 0
fi
sudo=''
[ "$(id -u)" -eq 0 ] || sudo='sudo'
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends wrk util-linux >/dev/null
wrk --version 2>&1 | head -1 || true
