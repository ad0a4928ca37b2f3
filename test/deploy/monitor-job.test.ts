// The job the chart's ServiceMonitor and PodMonitor give their targets, proven in a real Prometheus.
// No Prometheus Operator runs here, so this test writes the scrape configs it would generate from
// the rendered monitors, for the labels that decide the job (as its pkg/prometheus/promcfg.go
// writes them).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import type { IRelabelConfig } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/RelabelConfig';
import { findOne, must, ofKind, template } from '../chart/helm';
import { startService, type ServiceProcess } from '../support/service-process';
import { PROMETHEUS_WAIT, startPrometheus, type Prometheus, type Sample } from './prometheus';

const RELEASE = 'products';
const NAMESPACE = 'shop';
const JOB = 'products-product-service';
const RULES = ['--set', 'monitoring.prometheusRule.enabled=true'];

/** As generateRelabelConfig writes it: snake case (promtool check config fails an unknown field), the action in lower case. */
const toPrometheus = (relabeling: IRelabelConfig): Record<string, unknown> =>
  Object.fromEntries(
    Object.entries(relabeling).map(([key, value]) => [
      key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
      key === 'action' ? String(value).toLowerCase() : value,
    ]),
  );

interface Target {
  /** What Kubernetes service discovery would set on the target. */
  meta: Record<string, string>;
  /** The operator's relabelings before the endpoint's own. */
  operator: Array<Record<string, unknown>>;
  endpoint: { port?: string; relabelings?: IRelabelConfig[] };
}

const fromMeta = (meta: string, label: string) => ({ source_labels: [meta], target_label: label });

let dir = '';
let service: ServiceProcess | undefined;
let prometheus: Prometheus | undefined;
let recordedRule = '';

async function query(expr: string): Promise<Sample[]> {
  const body = await must(prometheus, 'Prometheus').query(expr);
  if (body.status !== 'success') throw new Error(`query ${expr}: ${JSON.stringify(body)}`);
  return body.data.result;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'deploy-monitor-job-'));
  const withServiceMonitor = template(['--set', 'monitoring.serviceMonitor.enabled=true', ...RULES], RELEASE, NAMESPACE);
  const withPodMonitor = template(['--set', 'monitoring.podMonitor.enabled=true', ...RULES], RELEASE, NAMESPACE);
  const serviceMonitor = findOne(withServiceMonitor, 'ServiceMonitor');
  const podMonitor = findOne(withPodMonitor, 'PodMonitor');
  // The Service the ServiceMonitor selects: its name is what the operator makes the job.
  const selected = ofKind(withServiceMonitor, 'Service').filter((svc) =>
    Object.entries(serviceMonitor.spec.selector.matchLabels ?? {}).every(([key, value]) => svc.metadata?.labels?.[key] === value),
  );
  expect(selected).toHaveLength(1);
  const metricsService = must(selected[0]?.metadata?.name, 'metrics Service name');
  const [smEndpoint] = serviceMonitor.spec.endpoints;
  const [pmEndpoint] = podMonitor.spec.podMetricsEndpoints ?? [];

  const serviceMonitorJob = [
    fromMeta('__meta_kubernetes_service_name', 'service'),
    { ...fromMeta('__meta_kubernetes_service_name', 'job'), replacement: '${1}' },
  ];
  const targets: Record<string, Target> = {
    [`serviceMonitor/${NAMESPACE}/${serviceMonitor.metadata?.name ?? ''}/0`]: {
      meta: { __meta_kubernetes_service_name: metricsService, __meta_kubernetes_pod_name: `${JOB}-sm` },
      operator: serviceMonitorJob,
      endpoint: must(smEndpoint, 'ServiceMonitor endpoint'),
    },
    [`podMonitor/${NAMESPACE}/${podMonitor.metadata?.name ?? ''}/0`]: {
      meta: { __meta_kubernetes_pod_name: `${JOB}-pm` },
      operator: [{ target_label: 'job', replacement: `${NAMESPACE}/${podMonitor.metadata?.name ?? ''}` }],
      endpoint: must(pmEndpoint, 'PodMonitor endpoint'),
    },
  };

  const rules = findOne(withServiceMonitor, 'PrometheusRule').spec;
  // A recording rule over the job's and namespace's series, which the service has from its start.
  recordedRule = must(
    rules.groups?.flatMap((group) => group.rules ?? []).find((rule) => rule.record === 'job_namespace:product_service_slo_requests:rate5m')?.record,
    'the recording rule job_namespace:product_service_slo_requests:rate5m',
  );
  const rulesFile = join(dir, 'rules.yaml');
  writeFileSync(rulesFile, stringify(rules));

  service = await startService();
  prometheus = await startPrometheus(dir, {
    rule_files: [rulesFile],
    scrape_configs: Object.entries(targets).map(([jobName, target]) => ({
      job_name: jobName,
      metrics_path: '/metrics',
      static_configs: [{ targets: [`127.0.0.1:${must(service, 'service').metricsPort}`], labels: { __meta_kubernetes_namespace: NAMESPACE, ...target.meta } }],
      relabel_configs: [
        fromMeta('__meta_kubernetes_namespace', 'namespace'),
        fromMeta('__meta_kubernetes_pod_name', 'pod'),
        ...target.operator,
        { target_label: 'endpoint', replacement: target.endpoint.port },
        ...(target.endpoint.relabelings ?? []).map(toPrometheus),
      ],
    })),
  });
  await vi.waitFor(async () => {
    expect((await query('up == 1')).length, prometheus?.log()).toBe(2);
  }, PROMETHEUS_WAIT);
}, 60_000);

afterAll(async () => {
  await prometheus?.stop();
  await service?.stop();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe("the job of the chart's monitors, in a real Prometheus", () => {
  it('is the release full name the rules select, for the ServiceMonitor and the PodMonitor', async () => {
    const up = await query(`up{namespace="${NAMESPACE}"}`);
    const jobOf = (pod: string) => up.find((sample) => sample.metric.pod === pod)?.metric.job;
    expect(jobOf(`${JOB}-sm`)).toBe(JOB);
    expect(jobOf(`${JOB}-pm`)).toBe(JOB);
    expect(up.find((sample) => sample.metric.pod === `${JOB}-sm`)?.metric).toMatchObject({ service: `${JOB}-metrics`, endpoint: 'metrics' });
  });

  it("gives the chart's rules the series they select, from both monitors' targets", async () => {
    const selected = await query(`product_service_build_info{job="${JOB}", namespace="${NAMESPACE}"}`);
    expect(selected.map((sample) => sample.metric.pod).sort()).toEqual([`${JOB}-pm`, `${JOB}-sm`]);
    await vi.waitFor(async () => expect((await query(`${recordedRule}{job="${JOB}", namespace="${NAMESPACE}"}`)).length).toBeGreaterThan(0), {
      timeout: 20_000,
      interval: 500,
    });
  });
});
