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
# apt-install.sh installs no recommends: the Compose client only, not the Docker engine it recommends.
sh "$(dirname "$0")/apt-install.sh" docker-compose
docker-compose version --short
