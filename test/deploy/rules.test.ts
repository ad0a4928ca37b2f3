// The alert and recording rules as the chart renders them (helm/product-service/templates/prometheusrule.yaml,
// their one source).
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { codeBlocks, section } from '../chart/docs';
import { ROOT } from '../support/paths';
import { DEPLOY_RULES, PROBE_RULE_VALUES, PROMETHEUS_INSTALL, RUNBOOK, alertsOf, parseRules, renderRules, requireTool, run } from './tools';

const TESTS_DIR = join(ROOT, 'test', 'deploy', 'rules');
const RELEASE = { release: 'products', namespace: 'shop' };
// A release name of 51 characters (Helm allows 53): its Deployment name is cut to 63, and so its
// pods' generated names hold no more than the first 58 characters of that.
const LONG_RELEASE = { release: 'catalogue-search-indexer-eu-west-1-production-green', namespace: 'shop' };
const RELEASE_OF: Record<string, typeof RELEASE> = { 'pods-long-release.test.yaml': LONG_RELEASE };
const RUNBOOK_URL = 'https://github.com/example-org/product-service/blob/main/docs/runbook.md';
// Rendered only with the synthetic probe on (monitoring.probe.enabled).
const PROBE_ALERT = 'ProductServiceProbeFailing';

/** Each unit-test file runs once per `<name>.values.yaml` or `<name>.<variant>.values.yaml`, else on the chart's defaults. */
const files = readdirSync(TESTS_DIR).sort();
const unitTests = files
  .filter((name) => name.endsWith('.test.yaml'))
  .flatMap((name) => {
    const stem = name.replace(/\.test\.yaml$/, '');
    const values = files.filter((file) => new RegExp(`^${stem}(\\.[\\w-]+)?\\.values\\.yaml$`).test(file)).map((file) => join(TESTS_DIR, file));
    return (values.length > 0 ? values.map((file) => [file]) : [[]]).map((set) => ({
      name: set.length > 0 ? `${name} with ${basename(set[0] ?? '')}` : name,
      path: join(TESTS_DIR, name),
      values: set,
      release: RELEASE_OF[name] ?? RELEASE,
    }));
  });

/** GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to dashes. */
const anchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

describe('alert and recording rules rendered from the chart', () => {
  let promtool = '';
  let dir = '';
  const defaults = parseRules(renderRules(RELEASE));
  const withProbe = alertsOf(parseRules(renderRules({ ...RELEASE, values: [PROBE_RULE_VALUES] })));
  beforeAll(() => {
    promtool = requireTool('promtool', PROMETHEUS_INSTALL);
    dir = mkdtempSync(join(tmpdir(), 'rules-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function promtoolTest(testFile: string, values: string[], set: string[] = [], release = RELEASE) {
    const work = mkdtempSync(join(dir, 'case-'));
    writeFileSync(join(work, 'rules.yaml'), renderRules({ ...release, values, set }));
    copyFileSync(testFile, join(work, basename(testFile)));
    return run(promtool, ['test', 'rules', basename(testFile)], { cwd: work, timeoutMs: 170_000 });
  }

  it.each(unitTests.map((test) => [test.name, test] as const))('promtool test rules %s', (_name, test) => {
    const result = promtoolTest(test.path, test.values, [], test.release);
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain('SUCCESS');
  });

  // Alertmanager routes and silences, and the dashboard's alert table, select the release by its job
  // and namespace, so an alert reading another release's series would pass them off as its own.
  // Pods are found through their owners, never by name.
  it.each([
    ['products', RELEASE, 'products-product-service'],
    ['a 51-character release name', LONG_RELEASE, 'catalogue-search-indexer-eu-west-1-production-green-product-ser'],
    ['fullnameOverride', { ...RELEASE, set: ['fullnameOverride=catalogue'] }, 'catalogue'],
  ])("every alert carries the release's job and namespace, and reads only its series (%s)", (_name, release, job) => {
    const rules = parseRules(renderRules(release));
    const selector = `job="${job}", namespace="${release.namespace}"`;
    for (const rule of rules.groups.flatMap((group) => group.rules)) {
      const name = rule.alert ?? rule.record;
      expect(rule.expr, name).not.toMatch(/job=~|pod=~/);
      for (const [, matchers = ''] of rule.expr.matchAll(/\{([^{}]*job=[^{}]*)\}/g)) expect(matchers, name).toContain(selector);
      if (rule.alert === undefined) continue;
      expect(rule.labels, name).toMatchObject({ job, namespace: release.namespace });
      for (const [read] of rule.expr.matchAll(/\bjob_namespace:[a-z_:0-9]+(\{[^}]*\})?/g)) expect(read, name).toMatch(new RegExp(`\\{[^}]*${selector}`));
    }
    expect(alertsOf(rules).map((rule) => rule.expr)).toContainEqual(expect.stringContaining('kube_pod_owner{'));
  });

  it('every alert has a severity, a summary, a description and a runbook section', () => {
    const headings = [...readFileSync(RUNBOOK, 'utf8').matchAll(/^#{2,3} (.+)$/gm)].map((match) => anchor(match[1] ?? ''));
    for (const rule of withProbe) {
      const name = rule.alert ?? '';
      expect(['critical', 'warning'], name).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, name).toBeTruthy();
      expect(rule.annotations?.description, name).toBeTruthy();
      expect(rule.annotations?.runbook_url, name).toBe(`${RUNBOOK_URL}#${name.toLowerCase()}`);
      expect(headings, `docs/runbook.md has no section for ${name}`).toContain(name.toLowerCase());
    }
  });

  // The runbook's scrape job for a Prometheus without the Operator: promtool accepts it, and its
  // series carry the job and namespace ProductServiceProbeFailing selects.
  it("the runbook's plain scrape job for the probe is valid and gives the series the probe alert selects", () => {
    const [recipe = ''] = codeBlocks(section(RUNBOOK, PROBE_ALERT), 'yaml');
    const file = join(dir, 'probe-scrape.yml');
    writeFileSync(file, recipe);
    const check = run(promtool, ['check', 'config', file]);
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const { scrape_configs: [job] = [] } = parse(recipe) as {
      scrape_configs?: Array<{ job_name: string; static_configs: Array<{ labels: { namespace: string } }> }>;
    };
    expect(withProbe.find((rule) => rule.alert === PROBE_ALERT)?.expr).toContain(
      `probe_success{job="${job?.job_name}", namespace="${job?.static_configs[0]?.labels.namespace}"}[`,
    );
  });

  // Sloth's and Pyrra's shape: the SLIs recorded over the shortest window, every longer window
  // derived from those recordings, so that no rule reads a raw series over a day or more.
  it('record the SLIs over 5m and derive every window of the burn-rate pairs from them', () => {
    const rules = defaults.groups.flatMap((group) => group.rules);
    const records = rules.filter((rule) => rule.record !== undefined);
    for (const name of ['job_namespace:product_service_slo_errors:rate5m', 'job_namespace:product_service_slo_requests:rate5m']) {
      expect(records.filter((rule) => rule.record === name).map((rule) => rule.labels?.slo)).toEqual(['availability', 'latency']);
    }
    for (const window of ['5m', '30m', '1h', '2h', '6h', '1d', '3d']) {
      expect(records.filter((rule) => rule.record === `job_namespace:product_service_slo_errors:ratio_rate${window}`)).toHaveLength(1);
    }
    // The one rule over the SLO period, in a group evaluated every 2m30s (Pyrra's), not at every evaluation.
    expect(defaults.groups.filter((group) => group.interval !== undefined)).toEqual([
      {
        name: 'product-service.slo-period',
        interval: '2m30s',
        rules: [expect.objectContaining({ record: 'job_namespace:product_service_slo_error_budget_remaining:ratio' })],
      },
    ]);
    expect(rules.filter((rule) => rule.expr.includes('[30d]')).map((rule) => rule.record)).toEqual([
      'job_namespace:product_service_slo_error_budget_remaining:ratio',
    ]);
    for (const rule of rules) {
      for (const [, selector = '', range = ''] of rule.expr.matchAll(/([a-zA-Z_:][\w:]*)\{[^{}]*\}\[(\d+[a-z]+)\]/g)) {
        if (/[dwy]$/.test(range)) expect(selector, `${rule.alert ?? rule.record} reads a raw series over ${range}`).toMatch(/^job_namespace:/);
      }
      expect(rule.expr, rule.alert ?? rule.record).not.toContain('ALERTS');
    }
  });

  // An edge's histogram has Envoy's bounds in milliseconds: a threshold between two of them would
  // be interpolated, so helm refuses it and names the bounds; one of them renders as that bucket.
  it.each(['envoy-gateway', 'istio'])('refuse a latency threshold that is not a bucket bound of %s', (source) => {
    // A values file: `--set` would pass 0.075 as a string.
    const values = (threshold: number): string[] => {
      const file = join(dir, `${source}-${threshold}.yaml`);
      writeFileSync(file, `monitoring: { prometheusRule: { slo: { source: ${source}, latency: { threshold: ${threshold} } } } }\n`);
      return [file];
    };
    expect(() => renderRules({ ...RELEASE, values: values(0.075) })).toThrow(
      new RegExp(`threshold 0.075 is not a bucket bound of ${source}'s request-duration histogram \\(Envoy's default bounds, in seconds: 0.0005, .*, 60\\)`),
    );
    const rules = renderRules({ ...RELEASE, values: values(2.5) });
    expect(rules).toContain('le=~"2500(\\\\.0)?"');
    expect(rules).not.toContain('http_server_request_duration_seconds_bucket');
  });

  describe("the compose stack's rule file", () => {
    it('is what the chart renders with deploy/prometheus/chart-values.yaml', () => {
      const result = run(process.execPath, [join(ROOT, 'scripts', 'render-rules.mjs'), '--check']);
      expect(result.status, result.stdout + result.stderr).toBe(0);
    });

    it('is reported when it drifts from the chart', () => {
      const drifted = join(dir, 'drifted.yaml');
      writeFileSync(drifted, readFileSync(DEPLOY_RULES, 'utf8').replace('for: 2m', 'for: 3m'));
      const result = run(process.execPath, [join(ROOT, 'scripts', 'render-rules.mjs'), '--check', '--file', drifted]);
      expect(result.status).toBe(1);
      expect(result.stderr).toMatch(/differs from what the chart renders\. Run: npm run deploy:rules/);
    });
  });
});
