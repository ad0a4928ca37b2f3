#!/bin/sh
# Installs what the tests of scripts/release/image-archive.mjs need beyond Node: skopeo (copies OCI
# images between archives and registries, as image.yml does when it publishes) and the CNCF
# Distribution registry (the package docker-registry), which the tests start themselves on a
# loopback port to push to. Both from the distribution's packages (Debian's here, Ubuntu's on
# GitHub's runners, which have skopeo already); the registry's own service is never started.
# Idempotent: does nothing when both are present.
set -eu

missing=""
command -v skopeo >/dev/null 2>&1 || missing="$missing skopeo"
command -v docker-registry >/dev/null 2>&1 || missing="$missing docker-registry"
if [ -z "$missing" ]; then
  echo "skopeo and docker-registry already installed: $(skopeo --version)"
  exit 0
fi

# shellcheck disable=SC2086 # one word per package
sh "$(dirname "$0")/apt-install.sh" $missing
skopeo --version
docker-registry --version
