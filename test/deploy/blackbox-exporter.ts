// The Prometheus blackbox exporter (Debian's prometheus-blackbox-exporter, installed by
// scripts/ci/install-prometheus.sh) on a free loopback port, and the scrape job the Prometheus
// Operator makes of the chart's Probe (templates/probe.yaml), so that the live-alert suite probes
// the service as a cluster would.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, vi } from 'vitest';
import { stringify } from 'yaml';
import { findOne, template } from '../chart/helm';
import { freePort } from '../support/service-process';
import { PROBE_RULE_VALUES, PROMETHEUS_INSTALL, requireTool } from './tools';

/** The chart's Probe of release `release` in `namespace`, with the probe on as probe.values.yaml turns it on. */
export const renderProbe = (release: string, namespace: string) => findOne(template(['--values', PROBE_RULE_VALUES], release, namespace), 'Probe');
type Probe = ReturnType<typeof renderProbe>;

interface BlackboxExporter {
  /** host:port, what the Probe's prober.url names. */
  readonly address: string;
  stop(): Promise<void>;
}

/** Serves `module` as the exporter's own example configuration defines it: an HTTP GET that succeeds on a 2xx. */
export async function startBlackboxExporter(dir: string, module: string): Promise<BlackboxExporter> {
  const bin = requireTool('prometheus-blackbox-exporter', PROMETHEUS_INSTALL);
  const config = join(dir, 'blackbox.yml');
  writeFileSync(config, stringify({ modules: { [module]: { prober: 'http' } } }));
  const port = await freePort();
  const child = spawn(bin, [`--config.file=${config}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], { stdio: 'ignore' });
  const address = `127.0.0.1:${port}`;
  await vi.waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`the blackbox exporter exited with ${child.exitCode}`);
      expect((await fetch(`http://${address}/-/healthy`)).status).toBe(200);
    },
    { timeout: 20_000, interval: 200 },
  );
  return {
    address,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/**
 * The scrape job the Prometheus Operator generates for `probe` (job `probe/<namespace>/<name>`, the
 * target as `instance`, the Probe's namespace as `namespace`), with the exporter at `exporter` and
 * `targets` in place of the Service's address; `interval` stands in for the Probe's (and its timeout).
 */
export function probeScrapeConfig(probe: Probe, exporter: string, targets: string[], interval: string): Record<string, unknown> {
  const { metadata, spec } = probe;
  return {
    job_name: `probe/${metadata?.namespace}/${metadata?.name}`,
    metrics_path: spec.prober?.path,
    scheme: spec.prober?.scheme,
    params: { module: [spec.module] },
    scrape_interval: interval,
    scrape_timeout: interval,
    static_configs: [{ targets, labels: { namespace: metadata?.namespace } }],
    relabel_configs: [
      { source_labels: ['__address__'], target_label: '__param_target' },
      { source_labels: ['__param_target'], target_label: 'instance' },
      { target_label: '__address__', replacement: exporter },
    ],
  };
}
