#!/bin/sh
# Installs Prometheus and promtool from Debian (bookworm ships 2.42) for the deploy tests:
# `promtool check/test rules`, `promtool check config|metrics`, and a real Prometheus that the
# tests start themselves on a loopback port; and Alertmanager with amtool (0.25), which
# test/deploy/alertmanager.test.ts starts the same way to check the shipped inhibit_rules; and the
# blackbox exporter (0.23), which the live-alert suite runs as the chart's Probe would have it probe.
# Idempotent: does nothing when all are present.
# It never starts the packaged service (scripts/ci/apt-install.sh).
# No setup action provides promtool, so GitHub's runners use this script too (ci.yml's
# deploy-tests job, with Ubuntu's packages).
set -eu

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 &&
  command -v prometheus-alertmanager >/dev/null 2>&1 && command -v amtool >/dev/null 2>&1 &&
  command -v prometheus-blackbox-exporter >/dev/null 2>&1; then
  echo "prometheus already installed: $(prometheus --version 2>&1 | head -n 1)"
  exit 0
fi

sh "$(dirname "$0")/apt-install.sh" prometheus prometheus-alertmanager prometheus-blackbox-exporter

prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1
prometheus-alertmanager --version 2>&1 | head -n 1
prometheus-blackbox-exporter --version 2>&1 | head -n 1
