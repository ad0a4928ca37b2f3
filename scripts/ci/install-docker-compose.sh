#!/bin/sh
# Installs Debian's docker-compose (1.29), used by the deploy tests to validate
# deploy/compose.yaml (`docker-compose config`; no engine is needed for that). Idempotent.
# Neither GitHub's runners (Compose v2 plugin only) nor the Debian VMs .ci/run is written for have
# the standalone client, so both install it from the distribution's packages with this script.
set -eu

if command -v docker-compose >/dev/null 2>&1; then
  echo "docker-compose already installed: $(docker-compose version --short 2>/dev/null || echo present)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-docker-compose.sh needs root (apt-get)." >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q
# --no-install-recommends: the Compose client only, not the Docker engine it recommends.
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends docker-compose
docker-compose version --short
