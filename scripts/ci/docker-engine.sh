#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine, for the container tests.
# On GitHub's runners Docker is preinstalled and running, so the workflows do not call this; here,
# on the Debian VMs .ci/run is written for (no engine, no image registry), it installs Debian's
# docker.io and starts dockerd.
# Idempotent: installs Debian's docker.io only when dockerd is missing, starts dockerd only
# when `docker info` does not answer, and returns as soon as the engine is usable.
#
# Why this shape (what these build machines are known to have and lack):
# - These machines run no engine by default and can pull no image; Debian's docker.io works.
# - Debian's client /usr/bin/docker (20.10) drives BuildKit; the /usr/local/bin/docker 28.x
#   client found on some machines has no buildx and refuses BuildKit builds, so callers must
#   use /usr/bin/docker with DOCKER_BUILDKIT=1.
# - The vfs storage driver needs no overlay support from the host kernel or filesystem.
set -euo pipefail

DOCKER=/usr/bin/docker
LOG=${DOCKERD_LOG:-/var/log/dockerd-ci.log}

# An engine that answers already: nothing to do (and no lock to wait for).
if [ -x "$DOCKER" ] && "$DOCKER" info >/dev/null 2>&1; then
  echo "docker-engine: ready ($("$DOCKER" version --format 'server {{.Server.Version}}'), storage $("$DOCKER" info --format '{{.Driver}}'))" >&2
  exit 0
fi

# Several test suites may call this script at once: one of them installs and starts the engine.
exec 9>/run/lock/docker-engine-ci.lock
flock 9

if [ ! -x /usr/sbin/dockerd ] || [ ! -x "$DOCKER" ]; then
  echo "docker-engine: installing Debian docker.io" >&2
  sh "$(dirname "$0")/apt-install.sh" docker.io >/dev/null
fi

if ! "$DOCKER" info >/dev/null 2>&1; then
  echo "docker-engine: starting dockerd (log: $LOG)" >&2
  # setsid: dockerd outlives this script and the test runner that called it.
  # 9>&-: dockerd must not inherit the lock, or every later run of this script would wait on it.
  setsid /usr/sbin/dockerd --storage-driver=vfs >"$LOG" 2>&1 </dev/null 9>&- &
  for _ in $(seq 1 120); do
    "$DOCKER" info >/dev/null 2>&1 && break
    sleep 0.5
  done
fi

if ! "$DOCKER" info >/dev/null 2>&1; then
  echo "docker-engine: dockerd did not answer within 60 s; last log lines:" >&2
  tail -n 20 "$LOG" >&2 || true
  exit 1
fi
echo "docker-engine: ready ($("$DOCKER" version --format 'server {{.Server.Version}}'), storage $("$DOCKER" info --format '{{.Driver}}'))" >&2
