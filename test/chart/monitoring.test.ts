// The chart's PrometheusRule and Grafana dashboard ConfigMap as `helm template` renders them, and the runbook's
// names (its kubectl commands: docs-commands.test.ts). Values that would render broken rules: render.test.ts;
// what the rules do: test/deploy/rules.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/paths';
import { chartDir, containerOf, envValue, findOne, must, ofKind, set, template, templateFails } from './helm';
import { validateObject } from './validate';

const RULES_AND_DASHBOARD = set('monitoring.prometheusRule.enabled=true', 'monitoring.grafanaDashboard.enabled=true');
const MONITORING = [...set('monitoring.serviceMonitor.enabled=true'), ...RULES_AND_DASHBOARD];
const SOURCE = JSON.parse(readFileSync(join(chartDir, 'files/dashboards/product-service.json'), 'utf8')) as Dashboard;

interface Dashboard {
  uid: string;
  title: string;
  templating: { list: Array<{ name: string; query?: unknown; current?: unknown }> };
  [key: string]: unknown;
}

type Rule = { alert?: string; record?: string; expr: string; labels?: Record<string, string>; annotations?: Record<string, string> };

function rulesOf(args: string[], release = 'products', namespace = 'shop'): { groups: Array<{ name: string; interval?: string; rules: Rule[] }> } {
  const objects = template([...MONITORING, ...args], release, namespace);
  const rule = findOne(objects, 'PrometheusRule');
  validateObject(rule);
  return rule.spec as never;
}
const alerts = (rules: ReturnType<typeof rulesOf>): Rule[] => rules.groups.flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));

function dashboardConfigMap(args: string[], release = 'products', namespace = 'shop') {
  const configMap = findOne(template([...MONITORING, ...args], release, namespace), 'ConfigMap');
  validateObject(configMap);
  const entries = Object.entries(must(configMap.data, 'ConfigMap data'));
  const [key = '', json = ''] = entries[0] ?? [];
  expect(entries).toHaveLength(1);
  return { configMap, key, dashboard: JSON.parse(json) as Dashboard };
}

describe('PrometheusRule', () => {
  // That the rules select this job and namespace: test/deploy/rules.test.ts 'every alert carries the release's job...'.
  it.each(['ServiceMonitor', 'PodMonitor'] as const)("sets the job of the chart's %s to the release's full name, before the values' relabelings", (kind) => {
    const monitor = kind === 'ServiceMonitor' ? 'serviceMonitor' : 'podMonitor';
    // A relabeling of the values', which must come after the chart's.
    const own = set(`monitoring.${monitor}.relabelings[0].targetLabel=team`, `monitoring.${monitor}.relabelings[0].replacement=shop`);
    for (const [args, job] of [
      [[], 'products-product-service'],
      [set('fullnameOverride=catalogue'), 'catalogue'],
    ] as const) {
      const objects = template([...set(`monitoring.${monitor}.enabled=true`), ...own, ...args]);
      // The chart sets the job; else the operator would name it after the metrics Service, or <namespace>/<PodMonitor>.
      // test/deploy/monitor-job.test.ts runs these relabelings in a real Prometheus.
      const endpoints = kind === 'ServiceMonitor' ? findOne(objects, kind).spec.endpoints : findOne(objects, kind).spec.podMetricsEndpoints;
      expect(endpoints?.map((endpoint) => endpoint.relabelings)).toEqual([
        [
          { action: 'replace', targetLabel: 'job', replacement: job },
          { targetLabel: 'team', replacement: 'shop' },
        ],
      ]);
    }
  });

  // runbook_url, and dashboard_url only with grafanaUrl, on the alerts as they fire: test/deploy/rules/tuned.test.yaml and the other promtool files.
  it('links the alerts to the dashboard under the uid the dashboard gets, or the one the values set', () => {
    const url = 'monitoring.prometheusRule.grafanaUrl=https://grafana.example.com';
    expect(dashboardConfigMap(set('monitoring.grafanaDashboard.uid=shop-products')).dashboard.uid).toBe('shop-products');
    for (const args of [set(url), set(url, 'monitoring.grafanaDashboard.uid=shop-products')]) {
      const { uid } = dashboardConfigMap(args).dashboard;
      for (const rule of alerts(rulesOf(args)))
        expect(rule.annotations?.dashboard_url).toBe(`https://grafana.example.com/d/${uid}?var-job=products-product-service&var-namespace=shop`);
    }
  });

  // The extra labels, annotations and severities on the alerts as they fire: test/deploy/rules/tuned.test.yaml.
  it('sets the interval of every group, leaves out disabled alerts, and puts no extra label on the recording rules', () => {
    const rules = rulesOf([
      ...set('monitoring.prometheusRule.additionalRuleLabels.team=shop', 'monitoring.prometheusRule.interval=15s'),
      ...set('monitoring.prometheusRule.disabled.ProductServiceLogLinesDropped=true'),
    ]);
    // The error budget's group keeps its own (slo.periodInterval): it reads the whole SLO period.
    expect(rules.groups.map((group) => [group.name, group.interval])).toEqual(
      rules.groups.map((group) => [group.name, group.name === 'product-service.slo-period' ? '2m30s' : '15s']),
    );
    // Every other alert stays.
    const all = alerts(rulesOf([])).map((rule) => rule.alert);
    expect(alerts(rules).map((rule) => rule.alert)).toEqual(all.filter((alert) => alert !== 'ProductServiceLogLinesDropped'));
    for (const rule of rules.groups.flatMap((group) => group.rules).filter((r) => r.record !== undefined)) expect(rule.labels?.team).toBeUndefined();
  });

  it('drops a group whose alerts are all disabled', () => {
    const disabled = ['ProductServiceTelemetryExportFailing', 'ProductServiceSpansDropped', 'ProductServiceLogLinesDropped'];
    const rules = rulesOf(set(...disabled.map((alert) => `monitoring.prometheusRule.disabled.${alert}=true`)));
    expect(rules.groups.map((group) => group.name)).not.toContain('product-service.telemetry');
  });
});

// The synthetic probe: a blackbox exporter asks for /health through the API's Service. That
// ProductServiceProbeFailing reads the Probe's job (the operator's probe/<namespace>/<name>) and pages:
// test/deploy/rules/probe.test.yaml, and live-alerts.test.ts with this Probe and a real exporter.
describe('Probe', () => {
  const PROBER = 'prometheus-blackbox-exporter.monitoring.svc:9115';

  it("is off by default; on, it probes /health through the API's Service", () => {
    expect(ofKind(template(MONITORING), 'Probe')).toEqual([]);
    expect(alerts(rulesOf([])).map((rule) => rule.alert)).not.toContain('ProductServiceProbeFailing');
    const objects = template([...MONITORING, ...set('monitoring.probe.enabled=true', `monitoring.probe.prober.url=${PROBER}`)]);
    const probe = findOne(objects, 'Probe');
    validateObject(probe);
    const service = ofKind(objects, 'Service').find((s) => s.spec?.ports?.some((port) => port.name === 'http'));
    const port = service?.spec?.ports?.find((p) => p.name === 'http')?.port;
    expect(probe.spec).toEqual({
      module: 'http_2xx',
      interval: '30s',
      scrapeTimeout: '2s',
      prober: { url: PROBER, scheme: 'http', path: '/probe' },
      targets: { staticConfig: { static: [`http://${service?.metadata?.name}.shop.svc:${port}/health`] } },
    });
  });

  it("is refused without the blackbox exporter's address", () => {
    expect(templateFails(set('monitoring.probe.enabled=true'))).toMatch(/monitoring.probe.enabled needs monitoring.probe.prober.url/);
  });
});

describe('the Deployment', () => {
  it('sets CONFIG_REVISION, a checksum of its variables that changes with a value, so a values-only release is marked', () => {
    const revision = (args: string[]) => envValue(containerOf(args), 'CONFIG_REVISION');
    expect(revision([])).toMatch(/^[0-9a-f]{12}$/);
    expect(revision([])).toBe(revision(set('replicaCount=3'))); // not a pod variable
    expect(revision(set('logLevel=debug'))).not.toBe(revision([]));
    expect(revision(set('extraEnv[0].name=BODY_LIMIT', 'extraEnv[0].value=512kb'))).not.toBe(revision([]));
  });
});

describe('Grafana dashboard ConfigMap', () => {
  it("holds the source dashboard as this release's: own uid and title, its job and namespace preselected", () => {
    const { configMap, key, dashboard } = dashboardConfigMap([]);
    expect(configMap.metadata?.name).toBe('shop-products-product-service-dashboard');
    expect(configMap.metadata?.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(key).toBe('shop-products-product-service.json');
    expect(dashboard.uid).toMatch(/^product-service-[0-9a-f]{16}$/);
    expect(dashboard.uid.length).toBeLessThanOrEqual(40); // Grafana's limit
    expect(dashboard.title).toBe('product-service (shop/products-product-service)');
    const current = Object.fromEntries(dashboard.templating.list.map((variable) => [variable.name, variable.current]));
    expect(current.job).toEqual({ text: 'products-product-service', value: 'products-product-service' });
    expect(current.namespace).toEqual({ text: 'shop', value: 'shop' });
    // Everything else is the source file's.
    const strip = (d: Dashboard) => ({
      ...d,
      uid: undefined,
      title: undefined,
      templating: { list: d.templating.list.map((v) => ({ ...v, current: undefined })) },
    });
    expect(strip(dashboard)).toEqual(strip(SOURCE));
  });

  it("searches traces by the service name the release's pods export (otel.serviceName, or the chart name)", () => {
    const serviceName = (args: string[]) => dashboardConfigMap(args).dashboard.templating.list.find((variable) => variable.name === 'service_name');
    expect(serviceName([])).toMatchObject({ query: 'product-service', current: { text: 'product-service', value: 'product-service' } });
    // render.test.ts: otel.serviceName is the pods' OTEL_SERVICE_NAME.
    expect(serviceName(set('otel.serviceName=catalogue-ids'))).toMatchObject({
      query: 'catalogue-ids',
      current: { text: 'catalogue-ids', value: 'catalogue-ids' },
    });
  });

  it("two releases of the same name, from two namespaces into Grafana's one namespace, do not collide", () => {
    const shared = set('monitoring.grafanaDashboard.namespace=monitoring');
    const shop = dashboardConfigMap(shared, 'products', 'shop');
    const staging = dashboardConfigMap(shared, 'products', 'staging');
    expect(shop.configMap.metadata?.namespace).toBe('monitoring');
    expect(staging.configMap.metadata?.namespace).toBe('monitoring');
    // Helm's ownership check (the ConfigMap's name), the sidecar's folder (the key), Grafana (uid and title).
    expect(shop.configMap.metadata?.name).not.toBe(staging.configMap.metadata?.name);
    expect(shop.key).not.toBe(staging.key);
    expect(shop.dashboard.uid).not.toBe(staging.dashboard.uid);
    expect(shop.dashboard.title).not.toBe(staging.dashboard.title);
  });

  it("draws the thresholds the rules use from the chart's values", () => {
    type Panel = { title: string; fieldConfig?: { defaults?: { thresholds?: { steps: Array<{ value: number | null }> } } } };
    const steps = (args: string[]) =>
      Object.fromEntries(
        (dashboardConfigMap(args).dashboard.panels as Panel[]).flatMap((panel) => {
          const values = panel.fieldConfig?.defaults?.thresholds?.steps.map((step) => step.value) ?? [];
          return values.length > 1 ? [[panel.title, values.slice(1)]] : [];
        }),
      );
    const latencyPanels = ['p99 POST /product', 'POST /product latency', 'p99 latency by route', 'POST /product p99 by pod'];
    const defaults = steps([]);
    for (const title of latencyPanels) expect(defaults[title]?.at(-1), title).toBe(0.25);
    expect(defaults['POST /product 5xx']).toEqual([0.001, 0.0144]);
    expect(defaults['Latency burn rate, per alert window']).toEqual([1, 6, 14.4]);
    expect(defaults['Event-loop utilisation']).toEqual([0.9]);

    const rule = 'monitoring.prometheusRule';
    const tuned = steps([
      ...['--set-json', `${rule}.slo.latency.threshold=0.5`, '--set-json', `${rule}.slo.availability.objective=99.5`],
      ...[
        '--set-json',
        `${rule}.alerts.ProductServiceErrorBudgetBurnFast.windows=[{"long":"1h","short":"5m","burnRate":10},{"long":"6h","short":"30m","burnRate":5}]`,
      ],
      ...['--set-json', `${rule}.alerts.ProductServiceEventLoopSaturated.threshold=0.75`],
    ]);
    for (const title of latencyPanels) expect(tuned[title]?.at(-1), title).toBe(0.5);
    // The availability budget (0.5%) is orange, the fast burn over it red.
    expect(tuned['POST /product 5xx']).toEqual([0.005, 0.05]);
    for (const slo of ['Availability', 'Latency']) expect(tuned[`${slo} burn rate, per alert window`]).toEqual([1, 5, 10]);
    expect(tuned['Event-loop utilisation']).toEqual([0.75]);
  });
});

// Its NS=, JOB= and RELEASE= names, the objects its commands name: docs-commands.test.ts.
describe('the runbook (docs/runbook.md)', () => {
  const runbook = readFileSync(join(ROOT, 'docs/runbook.md'), 'utf8');
  // The job of release "products" in namespace "shop": its full name, the Deployment's.
  const job = must(findOne(template(MONITORING, 'products', 'shop'), 'Deployment').metadata?.name, 'Deployment name');

  it("selects in its PromQL the job and namespace the chart's rules select", () => {
    const selectors = [...runbook.matchAll(/\{job="([^"]*)", namespace="([^"]*)"/g)].map((match) => `${match[1] ?? ''}/${match[2] ?? ''}`);
    expect(selectors.length).toBeGreaterThan(5);
    // Also the synthetic probe's job, the Prometheus Operator's probe/<namespace>/<Probe name>.
    expect(new Set(selectors)).toEqual(new Set([`${job}/shop`, `probe/shop/${job}/shop`]));
    expect(runbook).not.toMatch(/job=~/);
  });
});
