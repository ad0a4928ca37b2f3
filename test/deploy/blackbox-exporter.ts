// The Prometheus blackbox exporter (Debian's prometheus-blackbox-exporter, installed by
// scripts/ci/apt-install.sh) on a free loopback port, and the scrape job the Prometheus
// Operator makes of the chart's Probe (templates/probe.yaml), so that the live-alert suite probes
// the service as a cluster would.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { findOne, template } from '../chart/helm';
import { PROBE_RULE_VALUES, PROMETHEUS_INSTALL, requireTool, startDaemon, type Daemon } from './tools';

/** The chart's Probe of release `release` in `namespace`, with the probe on as probe.values.yaml turns it on. */
export const renderProbe = (release: string, namespace: string) => findOne(template(['--values', PROBE_RULE_VALUES], release, namespace), 'Probe');
type Probe = ReturnType<typeof renderProbe>;

/** Serves `module` as the exporter's own example configuration defines it: an HTTP GET that succeeds on a 2xx. */
export function startBlackboxExporter(dir: string, module: string): Promise<Daemon> {
  const config = join(dir, 'blackbox.yml');
  writeFileSync(config, stringify({ modules: { [module]: { prober: 'http' } } }));
  return startDaemon(
    requireTool('prometheus-blackbox-exporter', PROMETHEUS_INSTALL),
    (address) => [`--config.file=${config}`, `--web.listen-address=${address}`, '--log.level=warn'],
    '/-/healthy',
  );
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
