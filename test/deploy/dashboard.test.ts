import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { REFUSAL_REASONS } from '../../src/observability/metrics';
import { DASHBOARD, PROMETHEUS_INSTALL, allPanels, interpolate, loadDashboard, promTargets, requireTool, run, type Dashboard, type Panel } from './tools';

// Static checks of the chart's dashboard (helm/product-service/files/dashboards/product-service.json,
// which the compose stack provisions too); its queries run against a real Prometheus in
// live-prometheus.test.ts.
const dashboard = loadDashboard();
const text = readFileSync(DASHBOARD, 'utf8');
const panels = allPanels(dashboard) as Array<Panel & { description?: string; gridPos: { x?: number; y?: number; w: number; h: number } }>;
const variable = (name: string) => dashboard.templating.list.find((v) => v.name === name);
const titled = (title: string) => panels.find((panel) => panel.title.startsWith(title));
function inRow(title: string): typeof panels {
  const start = panels.findIndex((panel) => panel.type === 'row' && panel.title.startsWith(title));
  const end = panels.findIndex((panel, i) => i > start && panel.type === 'row');
  return panels.slice(start + 1, end);
}
const PROMETHEUS = { type: 'prometheus', uid: '${datasource}' };
const TEMPO = { type: 'tempo', uid: '${tracing}' };
const SERVICE = 'job=~"$job", namespace=~"$namespace", pod=~"$pod", instance=~"$instance"';
const KSM = 'namespace=~"$namespace", pod=~"$pod"';
const OUR_PODS = `and on (namespace, pod) up{${SERVICE}}`;
// Series the rules write (recording rules, ALERTS) belong to a job and namespace, not to a pod.
const JOB_NAMESPACE = 'job=~"$job", namespace=~"$namespace"';

function datasourceRefs(node: unknown, found: unknown[] = []): unknown[] {
  if (Array.isArray(node)) node.forEach((item) => datasourceRefs(item, found));
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'datasource') found.push(value);
      else datasourceRefs(value, found);
    }
  }
  return found;
}

describe('Grafana dashboard', () => {
  // Its uid, the one the compose stack's alerts link to: compose.test.ts 'the alerts link to the local Grafana's dashboard'.
  it('is a dashboard JSON, not an export for sharing', () => {
    expect(text).not.toContain('${DS_');
    expect(text).not.toContain('__inputs');
    expect(text).not.toContain('__requires');
  });

  it('chooses its data sources through variables', () => {
    expect(variable('datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(variable('tracing')).toMatchObject({ type: 'datasource', query: 'tempo' });
    // Every panel names one of them, which its queries inherit; the only fixed uid Grafana allows
    // is its built-in annotation source.
    for (const panel of panels.filter((p) => p.type !== 'row')) expect([PROMETHEUS, TEMPO], panel.title).toContainEqual(panel.datasource);
    for (const ref of datasourceRefs(dashboard)) expect([PROMETHEUS, TEMPO, { type: 'grafana', uid: '-- Grafana --' }]).toContainEqual(ref);
  });

  it('has job, namespace, pod and instance variables read from the service metrics; one job and one namespace at a time', () => {
    // A single namespace, so that no panel sums two environments' traffic into one line.
    for (const name of ['job', 'namespace']) {
      expect(variable(name), name).toMatchObject({ type: 'query', datasource: { uid: '${datasource}' } });
      expect(variable(name)?.includeAll || variable(name)?.multi, name).toBeFalsy();
    }
    for (const name of ['pod', 'instance']) {
      expect(variable(name), name).toMatchObject({ type: 'query', includeAll: true, multi: true, allValue: '.*', datasource: { uid: '${datasource}' } });
    }
    for (const name of ['namespace', 'pod', 'instance']) {
      expect(JSON.stringify(variable(name)?.query), name).toContain('product_service_build_info{job=~\\"$job\\"');
    }
  });

  it('has the rows the on-call questions need', () => {
    const rows = dashboard.panels.filter((panel) => panel.type === 'row').map((panel) => panel.title);
    for (const row of ['Overview', 'Alerts and SLOs', 'Traffic', 'Errors', 'Latency', 'Saturation', 'Telemetry', 'Traces']) {
      expect(
        rows.some((title) => title.startsWith(row)),
        row,
      ).toBe(true);
    }
  });

  const targets = promTargets(dashboard);

  /** Panels filter down to the selected pods and instances; annotations mark the whole job and namespace. */
  function checkQuery(expr: string, service = SERVICE): void {
    // $__rate_interval, so that rate/increase/changes follow the scrape interval.
    for (const range of expr.matchAll(/[})]\[([^\]]*)\]/g)) expect(range[1]).toBe('$__rate_interval');
    if (/\b(rate|increase|changes)\(/.test(expr)) expect(expr).toContain('[$__rate_interval]');
    // Every metric is read through a selector, never bare (a bare name would ignore the filters).
    const outsideSelectors = expr.replace(/\{[^{}]*\}/g, '{}').replace(/"[^"]*"/g, '""');
    expect(outsideSelectors).not.toMatch(/\b(?:up|ALERTS|job_namespace:[\w:]+|(?:http_server|product|process|nodejs|otel_sdk|kube|scrape)_\w+)\b(?![\w:]*\{)/);
    const selectors = [...expr.matchAll(/([\w:]*)\{([^{}]*)\}/g)];
    expect(selectors.length).toBeGreaterThan(0);
    for (const [whole, metric = '', matchers = ''] of selectors) {
      if (metric.startsWith('kube_')) {
        // kube-state-metrics series belong to pods, not to our scrape targets: they are kept
        // only for pods that are targets of the selected job and instances.
        expect(matchers, whole).toContain(KSM);
        expect(expr).toContain(OUR_PODS);
      } else if (metric === 'ALERTS' || metric.startsWith('job_namespace:') || matchers.includes('__name__=~"job_namespace:')) {
        expect(matchers, whole).toContain(JOB_NAMESPACE);
      } else {
        expect(matchers, whole).toContain(service);
      }
    }
  }

  it.each(targets.map(({ panel, expr }) => [panel.title, expr]))('query of %s is filtered by the variables and uses $__rate_interval: %s', (_name, expr) =>
    checkQuery(expr),
  );

  // Kubelet probes (GET /health every few seconds per pod) are not users: a panel of every route
  // leaves them out, so that traffic that stops does not look like a trickle.
  it('leaves the probes out of every request panel that is not about one route', () => {
    for (const { panel, expr } of targets) {
      for (const [whole, matchers = ''] of expr.matchAll(/http_server_request_duration_seconds\w*\{([^{}]*)\}/g)) {
        if (!/http_route="/.test(matchers)) expect(matchers, `${panel.title}: ${whole}`).toContain('http_route!="/health"');
      }
    }
  });

  it('searches slow traces of the selected namespace only', () => {
    expect(titled('Slow POST /product requests')?.targets?.[0]?.query).toContain('resource.k8s.namespace.name = "$namespace"');
  });

  it('says on every panel what it measures', () => {
    for (const panel of panels.filter((p) => p.type !== 'row')) expect(panel.description ?? '', panel.title).toMatch(/^.{60,}$/s);
  });

  it('names every reason the service counts a refusal under', () => {
    for (const reason of REFUSAL_REASONS) expect(titled('Refused before the application')?.description, reason).toContain(reason);
  });

  it('marks deploys and firing alerts of the selected job and namespace', () => {
    const annotations = (dashboard as Dashboard & { annotations: { list: Array<{ name: string; expr?: string; datasource: unknown }> } }).annotations.list;
    // Grafana adds its built-in "Annotations & Alerts" itself.
    expect(annotations.map((annotation) => annotation.name)).toEqual(['Deploys', 'Alerts firing', 'Faults injected']);
    for (const annotation of annotations) {
      expect(annotation.datasource).toEqual(PROMETHEUS);
      checkQuery(annotation.expr ?? '', JOB_NAMESPACE);
    }
    // `config` is the chart's checksum of the pod's variables: a values-only release is a deploy too.
    expect(annotations[0]?.expr).toMatch(
      /^count by \(version, revision, config\) \(product_service_build_info\{.*\}\) unless count by \(version, revision, config\) .* offset 5m\)$/,
    );
    expect(annotations[1]?.expr).toContain('ALERTS{alertstate="firing", job=~"$job", namespace=~"$namespace"}');
    for (const metric of ['product_service_fault_error_ratio', 'product_service_fault_delay_seconds']) {
      expect(annotations[2]?.expr).toContain(`${metric}{job=~"$job", namespace=~"$namespace"} > 0`);
    }
  });

  it('shows the game-day faults first, red while any is set', () => {
    const faults = inRow('Overview')[0] as (typeof panels)[number] & { fieldConfig: { defaults: { thresholds: { steps: Array<{ color: string }> } } } };
    expect(faults.title).toMatch(/^Faults injected/);
    expect(faults.gridPos).toMatchObject({ y: 1 });
    expect(faults.gridPos.x ?? 0).toBe(0);
    expect(faults.targets?.map((target) => target.expr)).toEqual([
      `max(product_service_fault_error_ratio{${SERVICE}})`,
      `max(product_service_fault_delay_seconds{${SERVICE}})`,
    ]);
    expect(faults.fieldConfig.defaults.thresholds.steps.map((step) => step.color)).toEqual(['green', 'red']);
  });

  it('shows exemplars on the latency panels and links them to the trace panel on the tracing variable', () => {
    const latency = inRow('Latency');
    expect(latency.length).toBeGreaterThanOrEqual(4);
    for (const panel of latency) {
      expect(
        panel.targets?.some((target) => target.exemplar === true),
        panel.title,
      ).toBe(true);
      const link = JSON.stringify((panel as Panel & { fieldConfig?: unknown }).fieldConfig);
      expect(link, panel.title).toContain('"options":"trace_id"');
      expect(link, panel.title).toContain('var-trace_id=${__value.raw}');
      expect(link, panel.title).toContain('${tracing:queryparam}');
      // This dashboard, whatever uid the chart gives it in a release.
      expect(link, panel.title).toContain('"url":"/d/${__dashboard.uid}?');
    }
    const traces = panels.find((panel) => panel.type === 'traces');
    expect(traces?.datasource).toEqual(TEMPO);
    expect(traces?.targets?.[0]?.query).toBe('${trace_id}');
  });

  // Grafana fills what the file leaves out: x and y 0, ids, refIds.
  it('lays panels out without overlap and with unique ids', () => {
    const ids = panels.flatMap((panel) => panel.id ?? []);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [i, { title, gridPos }] of panels.entries()) {
      const a = { x: 0, y: 0, ...gridPos };
      expect(a.x + a.w, title).toBeLessThanOrEqual(24);
      for (const { title: other, gridPos: bPos } of panels.slice(i + 1)) {
        const b = { x: 0, y: 0, ...bPos };
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect(overlap, `${title} overlaps ${other}`).toBe(false);
      }
    }
  });
});

// A latency outage: every POST /product a 499 (callers gave up), as the histogram records them.
// Prometheus' own engine (promtool) runs every latency quantile the dashboard shows over it.
describe('the latency panels and the p99 stat in an outage where every caller gives up (499)', () => {
  it('show a latency, not NaN or nothing', () => {
    const promtool = requireTool('promtool', PROMETHEUS_INSTALL);
    const quantiles = promTargets(dashboard).filter(({ expr }) => /^histogram_quantile\(.*http_server_request_duration_seconds_bucket/.test(expr));
    expect(quantiles.map(({ panel }) => panel.title)).toContain('p99 POST /product');
    const labels =
      'job="product-service", namespace="local", pod="p-1", instance="10.0.0.1:9464", http_request_method="POST", http_route="/product", http_response_status_code="499"';
    const tests = {
      rule_files: [],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: ['1', '+Inf'].map((le) => ({ series: `http_server_request_duration_seconds_bucket{${labels}, le="${le}"}`, values: '0+60x20' })),
          promql_expr_test: quantiles.map(({ panel, expr }) => ({
            // count() of the values that are numbers: 1 for a panel that shows a latency, nothing for one that is empty or NaN.
            expr: `count((${interpolate(expr, { job: 'product-service', namespace: 'local', pod: '.*', instance: '.*' }, '5m')}) >= 0) # ${panel.title}`,
            eval_time: '15m',
            exp_samples: [{ labels: '{}', value: 1 }],
          })),
        },
      ],
    };
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-499-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'outage.test.yaml'), stringify(tests));
    const result = run(promtool, ['test', 'rules', 'outage.test.yaml'], { cwd: dir });
    expect(result.status, result.stdout + result.stderr).toBe(0);
  });
});
