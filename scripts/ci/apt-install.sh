#!/bin/sh
# Installs Debian (or, on GitHub's runners, Ubuntu) packages with apt-get, as root, without starting
# the services they ship: the tests start their own, on loopback ports. policy-rc.d keeps the
# packages' maintainer scripts from starting one on machines that have an init system (there is no
# systemd here). Waits for another apt/dpkg run instead of failing on its lock. Installs only the
# packages missing: with all present it does nothing, and needs no root.
#
# Usage: sh scripts/ci/apt-install.sh PACKAGE...   (package.json's test:container, test:chart and
# test:deploy, the workflows, docker-engine.sh, base-images.sh)
set -eu

missing=""
for package in "$@"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing="$missing $package"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "apt-install.sh needs root (apt-get) to install:$missing" >&2
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

export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q
# shellcheck disable=SC2086 # one word per package
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing
