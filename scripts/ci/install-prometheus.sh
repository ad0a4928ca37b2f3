#!/bin/sh
# Installs Prometheus and promtool from Debian (bookworm ships 2.42) for the deploy tests:
# `promtool check/test rules`, `promtool check config|metrics`, and a real Prometheus that the
# tests start themselves on a loopback port. Idempotent: does nothing when both are present.
# It never starts the packaged service (no systemd here; and policy-rc.d keeps postinst from
# starting it on machines that have an init system).
# No setup action provides promtool, so GitHub's runners use this script too (ci.yml's
# deploy-tests job, with Ubuntu's packages).
set -eu

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  echo "prometheus already installed: $(prometheus --version 2>&1 | head -n 1)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-prometheus.sh needs root (apt-get)." >&2
  exit 1
fi

# Refuse service starts during the install only if no policy is in place already.
policy=/usr/sbin/policy-rc.d
created_policy=no
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  created_policy=yes
fi
cleanup() {
  if [ "$created_policy" = yes ]; then rm -f "$policy"; fi
}
trap cleanup EXIT

# Another apt/dpkg run (e.g. a parallel installer) holds the lock: wait for it instead of failing.
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus

prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1
