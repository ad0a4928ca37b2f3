import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { must } from '../chart/helm';
import { sampleValue, scrape } from '../support/exposition';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { startService, VERSION, type ServiceProcess } from '../support/service-process';
import { PROMETHEUS_WAIT, startPrometheus, type Prometheus, type RuleState, type Sample } from './prometheus';
import { PROMETHEUS_INSTALL, interpolate, loadDashboard, parseRules, promTargets, renderRules, requireTool, run, type Dashboard } from './tools';

// The whole observability path on real parts, the built service scraped by a real Prometheus with
// the chart's rules, then every dashboard query run against that Prometheus.

const JOB = 'product-service';
const NAMESPACE = 'test';
const POD = 'product-service-0';
const CONFIG = '0f1e2d3c4b5a';
const PERIOD_INTERVAL = 5;

describe('dashboard and rules against a real Prometheus scraping the running service', () => {
  let dir = '';
  let service: ServiceProcess | undefined;
  let prometheus: Prometheus | undefined;
  const prom = (): Prometheus => must(prometheus, 'Prometheus');
  let receiver: OtlpReceiver | undefined;
  let rulesFile = '';
  let trafficStarted = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'deploy-prometheus-'));
    // The chart's rules for a release named after the scrape job, in the scrape's namespace; the
    // error budget's group every 5 evaluations, as its 2m30s is at Prometheus' default 30 s.
    rulesFile = join(dir, 'rules.yaml');
    writeFileSync(rulesFile, renderRules({ release: JOB, namespace: NAMESPACE, set: [`monitoring.prometheusRule.slo.periodInterval=${PERIOD_INTERVAL}s`] }));

    receiver = await startOtlpReceiver();
    service = await startService({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, // OTLP/HTTP protobuf, the default, as to a collector
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_SERVICE_NAME: 'product-service',
      CONFIG_REVISION: CONFIG, // as the chart sets it
      // The test's client stands in for the proxy that sends X-Request-Start.
      QUEUE_TIME_HEADER: 'X-Request-Start',
      QUEUE_TIME_FROM: '127.0.0.1',
    });

    // The scrape adds the labels a Kubernetes scrape would (namespace, pod), as deploy/compose.yaml does.
    prometheus = await startPrometheus(
      dir,
      {
        rule_files: [rulesFile],
        scrape_configs: [{ job_name: JOB, static_configs: [{ targets: [`127.0.0.1:${service.metricsPort}`], labels: { namespace: NAMESPACE, pod: POD } }] }],
      },
      ['--enable-feature=exemplar-storage'],
    );
    await vi.waitFor(
      async () => {
        const up = await prom().query(`up{job="${JOB}"}`);
        expect(up.data.result[0]?.value[1], 'up').toBe('1');
      },
      { ...PROMETHEUS_WAIT, message: 'timed out waiting for Prometheus to scrape the service' },
    );

    // Successes, a 404 and a 405, so that every panel has something to show.
    trafficStarted = Date.now();
    const base = service.baseUrl;
    while (Date.now() - trafficStarted < 12_000) {
      const posts = Array.from({ length: 5 }, () =>
        fetch(`${base}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x"}' }).then((response) =>
          response.arrayBuffer(),
        ),
      );
      // The 404 comes "through a proxy" that received it 5 ms earlier: the queue-time panel has data.
      const others = ['/health', '/no-such-path'].map(async (path) => {
        const response = await fetch(`${base}${path}`, path === '/health' ? {} : { headers: { 'x-request-start': `t=${Date.now() - 5}` } });
        await response.arrayBuffer();
      });
      const wrongMethod = fetch(`${base}/product`, { method: 'DELETE' }).then((response) => response.arrayBuffer());
      await Promise.all([...posts, ...others, wrongMethod]);
      await sleep(100);
    }
    // Let Prometheus scrape the final counts and evaluate the rules on them.
    await sleep(3000);
  });

  afterAll(async () => {
    await prometheus?.stop();
    await service?.stop();
    await receiver?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('promtool check metrics accepts a live scrape', async () => {
    const promtool = requireTool('promtool', PROMETHEUS_INSTALL);
    const exposition = await scrape(service?.metricsUrl ?? '');
    expect(sampleValue(exposition, 'product_ids_issued_total')).toBeDefined();
    const result = run(promtool, ['check', 'metrics'], { input: exposition });
    // Clean: the service drops the three prom-client gauges named "..._total" (src/observability/metrics.ts).
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('the dashboard variables find the service', async () => {
    const values = async (label: string, match: string) => (await prom().api<string[]>(`/api/v1/label/${label}/values`, { 'match[]': match })).data;
    expect(await values('job', 'product_service_build_info')).toEqual([JOB]);
    expect(await values('namespace', `product_service_build_info{job=~"${JOB}"}`)).toEqual([NAMESPACE]);
    expect(await values('pod', `product_service_build_info{job=~"${JOB}", namespace=~".*"}`)).toEqual([POD]);
    expect(await values('instance', `product_service_build_info{job=~"${JOB}", namespace=~".*", pod=~".*"}`)).toEqual([`127.0.0.1:${service?.metricsPort}`]);
  });

  const dashboard = loadDashboard() as Dashboard & { annotations: { list: Array<{ name: string; expr?: string }> } };
  const targets = promTargets(dashboard);
  // Grafana escapes regex characters of the chosen values, and the backslash for the PromQL string.
  const escape = (value: string) => value.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&');
  const allPods = { job: JOB, namespace: NAMESPACE, pod: '.*', instance: '.*' };

  it.each([
    ['all pods', () => allPods],
    ['one pod', () => ({ ...allPods, pod: POD, instance: escape(`127.0.0.1:${service?.metricsPort}`) })],
  ])('every dashboard query is valid and returns data (variables: %s)', async (_set, variables) => {
    const values = variables();
    const empty: string[] = [];
    for (const { panel, expr } of targets) {
      const promql = interpolate(expr, values, '1m');
      // No variable left ($1 is label_replace's own reference).
      expect(promql, panel.title).not.toMatch(/\$(?!\d)/);
      const result = await prom().query(promql);
      expect(result.status, `${panel.title}: ${promql}: ${result.error ?? ''}`).toBe('success');
      if (result.data.result.length === 0) empty.push(`${panel.title}: ${expr}`);
    }
    // Only the kube-state-metrics queries (container requests, limits and restarts) and the alerts
    // table (nothing is pending on a healthy service) have nothing here.
    const allowed = targets.filter(({ expr }) => expr.includes('kube_') || expr.startsWith('ALERTS')).map(({ panel, expr }) => `${panel.title}: ${expr}`);
    expect(empty.sort()).toEqual(allowed.sort());
    expect(allowed.length).toBeLessThanOrEqual(5);
  });

  it('the queue-time panel shows the wait a trusted proxy reported', async () => {
    const queued = targets.filter(({ expr }) => expr.includes('product_service_http_request_queue_seconds_bucket'));
    expect(queued.length).toBeGreaterThan(0);
    for (const { expr } of queued) {
      const seconds = Number((await prom().query(interpolate(expr, allPods, '1m'))).data.result[0]?.value[1]);
      // At least the 5 ms the header claims; well under a second on a machine this size.
      expect(seconds, expr).toBeGreaterThanOrEqual(0.004);
      expect(seconds, expr).toBeLessThan(1);
    }
  });

  it('the annotation queries are valid; the deploy marker shows the build that started', async () => {
    const results = new Map<string, Sample[]>();
    for (const annotation of dashboard.annotations.list.filter((a) => a.expr !== undefined)) {
      const result = await prom().query(interpolate(annotation.expr ?? '', allPods, '1m'));
      expect(result.status, `${annotation.name}: ${result.error ?? ''}`).toBe('success');
      results.set(annotation.name, result.data.result);
    }
    // A release that changes only values changes `config`: the marker must tell it apart.
    expect(results.get('Deploys')?.map(({ metric }) => [metric.version, metric.config])).toEqual([[VERSION, CONFIG]]);
    expect(results.get('Alerts firing')).toEqual([]);
    expect(results.get('Faults injected')).toEqual([]);
  });

  it('the latency panels have exemplars whose trace ids reach the trace backend and the logs', async () => {
    const exemplarTargets = targets.filter(({ target }) => target.exemplar === true);
    expect(exemplarTargets.length).toBeGreaterThanOrEqual(3);
    const traceIds = new Set<string>();
    for (const { panel, expr } of exemplarTargets) {
      const result = await prom().api<Array<{ exemplars: Array<{ labels: Record<string, string> }> }>>('/api/v1/query_exemplars', {
        query: interpolate(expr, allPods, '1m'),
        start: String((trafficStarted - 60_000) / 1000),
        end: String(Date.now() / 1000),
      });
      expect(result.status, panel.title).toBe('success');
      const found = result.data.flatMap((series) => series.exemplars.map((exemplar) => exemplar.labels.trace_id ?? ''));
      expect(found.length, `${panel.title} has no exemplars`).toBeGreaterThan(0);
      for (const id of found) {
        expect(id).toMatch(/^[0-9a-f]{32}$/);
        traceIds.add(id);
      }
    }
    // "Click an exemplar, open its trace, find its log line": each exemplar's trace was exported
    // over OTLP, and the service logged the request with the same trace_id.
    // The spans also have what the dashboard's TraceQL search filters on: resource.service.name
    // and span.http.route (absent, per the semantic conventions, when no route matched).
    for (const id of traceIds) {
      const spans = (await receiver?.waitForSpans((span) => span.traceId === id)) ?? [];
      const logged = service?.logLines().find((line) => line.trace_id === id);
      expect(logged, `no log line with trace_id ${id}`).toMatchObject({ msg: 'request completed' });
      const route = logged?.route === 'unmatched' ? undefined : logged?.route;
      const mine = spans.filter((span) => span.traceId === id);
      expect(
        mine.some((span) => span.resource['service.name'] === 'product-service' && span.attributes['http.route'] === route),
        JSON.stringify(mine),
      ).toBe(true);
    }
  });

  // That nothing is pending or firing on a healthy service: live-alerts.test.ts 'with no fault, nothing was pending or firing, all through the suite'.
  it('loads every rule and evaluates it without error on the healthy service', async () => {
    const rules = await prom().api<{ groups: Array<{ name: string; file: string; interval: number; rules: RuleState[] }> }>('/api/v1/rules');
    const loaded = rules.data.groups.flatMap((group) => group.rules);
    // Every group at the global evaluation interval (1 s), the error budget's at its own.
    expect(rules.data.groups.filter((group) => group.interval !== 1).map((group) => [group.name, group.interval])).toEqual([
      ['product-service.slo-period', PERIOD_INTERVAL],
    ]);
    const expected = parseRules(readFileSync(rulesFile, 'utf8')).groups.flatMap((g) => g.rules.map((rule) => rule.alert ?? rule.record));
    expect(loaded.map((rule) => rule.name).sort()).toEqual(expected.sort());
    for (const rule of loaded) {
      expect(rule.health, `${rule.name}: ${rule.lastError ?? ''}`).toBe('ok');
      expect(Date.parse(rule.lastEvaluation), rule.name).toBeGreaterThan(trafficStarted);
    }
    // The SLO recording rules match this job.
    const ratio = await prom().query(`job_namespace:product_service_slo_errors:ratio_rate5m{job="${JOB}", namespace="${NAMESPACE}"}`);
    expect(ratio.data.result.map((sample) => [sample.metric.slo, sample.value[1]]).sort()).toEqual([
      ['availability', '0'],
      ['latency', '0'],
    ]);
  });

  // Issue 34: the chart's 30 recording rules became 14 (Sloth's shape); on a healthy service their
  // evaluations return 22 samples (30 before), by Prometheus' own count.
  it('the rule groups return at most 22 samples per evaluation on the healthy service', async () => {
    const own = await (await fetch(`${prom().url}/metrics`)).text();
    const perGroup = [...own.matchAll(/^prometheus_rule_group_last_evaluation_samples\{.*\} (\d+)$/gm)].map((match) => Number(match[1]));
    expect(perGroup).toHaveLength(parseRules(readFileSync(rulesFile, 'utf8')).groups.length);
    expect(perGroup.reduce((sum, value) => sum + value, 0)).toBeLessThanOrEqual(22);
  });
});
