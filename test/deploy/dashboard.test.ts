import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DASHBOARD, allPanels, loadDashboard, promTargets, type Panel } from './tools';

// Static checks of deploy/grafana/dashboards/product-service.json: that it imports into any
// Grafana with any Prometheus (data sources are variables), and that every query is filtered
// by the namespace/pod/instance variables and uses $__rate_interval. The queries themselves are
// run against a real Prometheus in live-prometheus.test.ts.
const dashboard = loadDashboard();
const text = readFileSync(DASHBOARD, 'utf8');
const variable = (name: string) => dashboard.templating.list.find((v) => v.name === name);
const FILTER = 'namespace=~"$namespace", pod=~"$pod"';
const OUR_PODS = 'and on (namespace, pod) up{job=~"$job", namespace=~"$namespace", pod=~"$pod", instance=~"$instance"}';

/** Every object under a "datasource" key, anywhere in the JSON (panels, targets, variables, annotations). */
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
  it('is a dashboard JSON with a fixed uid, not an export for sharing', () => {
    expect(dashboard.uid).toBe('product-service');
    expect(dashboard.title).toBe('product-service');
    expect(text).not.toContain('${DS_');
    expect(text).not.toContain('__inputs');
    expect(text).not.toContain('__requires');
  });

  it('chooses its data sources through variables', () => {
    expect(variable('datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(variable('tracing')).toMatchObject({ type: 'datasource', query: 'tempo' });
    const refs = datasourceRefs(dashboard);
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of refs) {
      // The only fixed uid Grafana allows: its built-in annotation source.
      expect([
        { type: 'prometheus', uid: '${datasource}' },
        { type: 'tempo', uid: '${tracing}' },
        { type: 'grafana', uid: '-- Grafana --' },
      ]).toContainEqual(ref);
    }
  });

  it('has job, namespace, pod and instance variables read from the service metrics', () => {
    expect(variable('job')).toMatchObject({ type: 'query', includeAll: false, datasource: { uid: '${datasource}' } });
    for (const name of ['namespace', 'pod', 'instance']) {
      expect(variable(name), name).toMatchObject({ type: 'query', includeAll: true, multi: true, allValue: '.*', datasource: { uid: '${datasource}' } });
      expect(JSON.stringify(variable(name)?.query), name).toContain('product_service_build_info{job=~\\"$job\\"');
    }
  });

  it('has the rows the on-call questions need', () => {
    const rows = dashboard.panels.filter((panel) => panel.type === 'row').map((panel) => panel.title);
    for (const row of ['Overview', 'Traffic', 'Errors', 'Latency', 'Saturation', 'Telemetry', 'Traces']) {
      expect(
        rows.some((title) => title.startsWith(row)),
        row,
      ).toBe(true);
    }
  });

  const targets = promTargets(dashboard);
  it('has PromQL targets', () => expect(targets.length).toBeGreaterThan(30));

  it.each(targets.map(({ panel, target, expr }) => [`${panel.title} ${target.refId}`, expr]))(
    'query %s is filtered by namespace, pod and instance and uses $__rate_interval',
    (_name, expr) => {
      // Every range (after a selector or a subquery) is $__rate_interval, so rate/increase/changes
      // follow the scrape interval.
      for (const range of expr.matchAll(/[})]\[([^\]]*)\]/g)) expect(range[1]).toBe('$__rate_interval');
      if (/\b(rate|increase|changes)\(/.test(expr)) expect(expr).toContain('[$__rate_interval]');
      // Every metric is read through a selector, never bare (a bare name would ignore the filters).
      expect(expr).not.toMatch(/\b(?:up|(?:http_server|product|process|nodejs|otel_sdk|kube|scrape)_\w+)\b(?!\{)/);
      const selectors = [...expr.matchAll(/(\w+)\{([^{}]*)\}/g)];
      expect(selectors.length).toBeGreaterThan(0);
      for (const [whole, metric = '', matchers = ''] of selectors) {
        expect(matchers, whole).toContain(FILTER);
        if (metric.startsWith('kube_')) {
          // kube-state-metrics series belong to pods, not to our scrape targets: they are kept
          // only for pods that are targets of the selected job and instances.
          expect(expr).toContain(OUR_PODS);
        } else {
          expect(matchers, whole).toContain('job=~"$job", namespace=~"$namespace", pod=~"$pod", instance=~"$instance"');
        }
      }
    },
  );

  it('shows exemplars on the latency panels and links them to the trace panel on the tracing variable', () => {
    const latency = allPanels(dashboard).filter((panel) => /latency/i.test(panel.title) && panel.type !== 'row' && panel.type !== 'stat');
    expect(latency.length).toBeGreaterThanOrEqual(3);
    for (const panel of latency) {
      expect(
        panel.targets?.some((target) => target.exemplar === true),
        panel.title,
      ).toBe(true);
      const link = JSON.stringify((panel as Panel & { fieldConfig?: unknown }).fieldConfig);
      expect(link, panel.title).toContain('"options":"trace_id"');
      expect(link, panel.title).toContain('var-trace_id=${__value.raw}');
      expect(link, panel.title).toContain('${tracing:queryparam}');
    }
    const traces = allPanels(dashboard).find((panel) => panel.type === 'traces');
    expect(traces?.datasource).toEqual({ type: 'tempo', uid: '${tracing}' });
    expect(traces?.targets?.[0]?.query).toBe('${trace_id}');
  });

  it('lays panels out without overlap and with unique ids', () => {
    const panels = allPanels(dashboard) as Array<Panel & { gridPos: { x: number; y: number; w: number; h: number } }>;
    expect(new Set(panels.map((panel) => panel.id)).size).toBe(panels.length);
    for (const [i, a] of panels.entries()) {
      expect(a.gridPos.x + a.gridPos.w, a.title).toBeLessThanOrEqual(24);
      for (const b of panels.slice(i + 1)) {
        const overlap =
          a.gridPos.x < b.gridPos.x + b.gridPos.w &&
          b.gridPos.x < a.gridPos.x + a.gridPos.w &&
          a.gridPos.y < b.gridPos.y + b.gridPos.h &&
          b.gridPos.y < a.gridPos.y + a.gridPos.h;
        expect(overlap, `${a.title} overlaps ${b.title}`).toBe(false);
      }
    }
  });
});
