#!/bin/sh
# Static checks of the Helm chart for .ci/run: the README's parameters table is current, and
# `helm lint --strict` and `helm template` pass over the defaults and every ci/*-values.yaml,
# with Helm 4 and Helm 3.
# (`helm lint` does not report a template's `fail`, so every set is also rendered.)
# The deeper checks (API schemas, policies, the container run) are the vitest project `chart`.
set -eu

root=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
cd "$root"
sh scripts/ci/install-helm.sh
chart=helm/product-service
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM

sh scripts/node.sh scripts/chart-readme.mjs --check

# Rendered as for a cluster that has the CRDs the value sets use (the chart refuses a ServiceMonitor,
# PrometheusRule or HTTPRoute without their API): one --api-versions per line of the list.
api_versions=$(grep -v '^#' scripts/ci/chart-api-versions.txt | sed 's/^/--api-versions=/' | tr '\n' ' ')

# Runs helm, showing its output only on failure.
run() {
  if ! "$helm" "$@" >"$out" 2>&1; then
    cat "$out" >&2
    echo "chart-check: helm $* failed" >&2
    exit 1
  fi
}

for helm in .tools/bin/helm .tools/bin/helm3; do
  for values in "" "$chart"/ci/*-values.yaml; do
    if [ -n "$values" ]; then set -- --values "$values"; else set --; fi
    run lint --strict "$chart" "$@"
    run template products "$chart" --namespace shop $api_versions "$@"
    echo "chart-check: ${helm##*/}: ${values:-chart defaults}: helm lint --strict and helm template ok ($(grep -c '^kind:' "$out") objects)"
  done
done
