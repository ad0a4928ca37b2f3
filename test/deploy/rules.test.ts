import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PROMETHEUS_INSTALL, RUNBOOK, requireTool, ruleFiles, ruleTestFiles, run } from './tools';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  groups: Array<{ name: string; rules: Rule[] }>;
}
interface AlertTest {
  alertname: string;
  eval_time: string;
  exp_alerts?: unknown[];
}
interface RuleTestFile {
  rule_files: string[];
  tests: Array<{ name?: string; alert_rule_test?: AlertTest[] }>;
}

const RUNBOOK_URL = 'https://github.com/example-org/product-service/blob/main/docs/runbook.md';
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the shape it expects
const readYaml = <T>(path: string): T => parse(readFileSync(path, 'utf8')) as T;
const alertsOf = (file: string): Rule[] => readYaml<RuleFile>(file).groups.flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));

/** GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to dashes. */
const anchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

describe('Prometheus rule files', () => {
  let promtool = '';
  beforeAll(() => {
    promtool = requireTool('promtool', PROMETHEUS_INSTALL);
  });

  it('are found, and each is a plain Prometheus rule file (only `groups:` at the top)', () => {
    expect(ruleFiles().map((file) => basename(file))).toEqual(['product-service-alerts.yaml', 'product-service-slo.yaml']);
    for (const file of ruleFiles()) expect(Object.keys(readYaml<object>(file)), file).toEqual(['groups']);
  });

  it.each(ruleFiles().map((file) => [basename(file), file]))('promtool check rules %s', (_name, file) => {
    const result = run(promtool, ['check', 'rules', file]);
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it.each(ruleTestFiles().map((file) => [basename(file), file]))('promtool test rules %s', (_name, file) => {
    const result = run(promtool, ['test', 'rules', basename(file)], { cwd: join(file, '..'), timeoutMs: 170_000 });
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain('SUCCESS');
  });

  it('every rule file has a unit test file, and every alert is tested both firing and silent', () => {
    const tests = ruleTestFiles().map((file) => readYaml<RuleTestFile>(file));
    for (const file of ruleFiles()) {
      const covering = tests.filter((test) => test.rule_files.includes(basename(file)));
      expect(covering.length, `no *.test.yaml loads ${basename(file)}`).toBeGreaterThan(0);
      const cases = covering.flatMap((test) => test.tests.flatMap((t) => t.alert_rule_test ?? []));
      for (const { alert } of alertsOf(file)) {
        const mine = cases.filter((c) => c.alertname === alert);
        expect(
          mine.some((c) => (c.exp_alerts ?? []).length > 0),
          `${String(alert)} is never shown firing`,
        ).toBe(true);
        expect(
          mine.some((c) => (c.exp_alerts ?? []).length === 0),
          `${String(alert)} is never shown silent`,
        ).toBe(true);
      }
    }
  });

  it('every alert has a severity, a summary, a description with the current value and a runbook section', () => {
    const headings = [...readFileSync(RUNBOOK, 'utf8').matchAll(/^#{2,3} (.+)$/gm)].map((match) => anchor(match[1] ?? ''));
    const alerts = ruleFiles().flatMap(alertsOf);
    expect(alerts.length).toBeGreaterThanOrEqual(12);
    for (const rule of alerts) {
      const name = rule.alert ?? '';
      expect(['critical', 'warning'], name).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, name).toBeTruthy();
      expect(rule.annotations?.description, name).toContain('$value');
      expect(rule.annotations?.runbook_url, name).toBe(`${RUNBOOK_URL}#${name.toLowerCase()}`);
      expect(headings, `docs/runbook.md has no section for ${name}`).toContain(name.toLowerCase());
    }
  });

  it('the SLO file records the burn-rate windows and alerts on pairs of them', () => {
    const slo = readYaml<RuleFile>(ruleFiles().find((file) => file.endsWith('slo.yaml')) ?? '');
    const records = slo.groups.flatMap((group) => group.rules.map((rule) => rule.record)).filter(Boolean);
    for (const window of ['5m', '30m', '1h', '2h', '6h', '1d', '3d']) {
      expect(records).toContain(`job_namespace:product_service_create_errors:ratio_rate${window}`);
    }
    const alerts = slo.groups.flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));
    expect(alerts.map((rule) => [rule.alert, rule.labels?.severity])).toEqual([
      ['ProductServiceErrorBudgetBurnFast', 'critical'],
      ['ProductServiceErrorBudgetBurnSlow', 'warning'],
    ]);
  });

  // The unit tests can fail: with a 5xx threshold of 50% instead of 5%, the "high 5xx ratio"
  // case (10% errors) no longer fires and promtool says so.
  describe('a broken rule', () => {
    let dir = '';
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'rules-mutant-'));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('makes promtool test rules fail', () => {
      const source = ruleFiles().find((file) => file.endsWith('alerts.yaml')) ?? '';
      const tests = ruleTestFiles().find((file) => file.endsWith('alerts.test.yaml')) ?? '';
      const original = readFileSync(source, 'utf8');
      const mutant = original.replace(/\n(\s+)> 0\.05\n(\s+)for: 5m/, '\n$1> 0.5\n$2for: 5m');
      expect(mutant).not.toBe(original);
      writeFileSync(join(dir, basename(source)), mutant);
      copyFileSync(tests, join(dir, basename(tests)));
      const result = run(promtool, ['test', 'rules', basename(tests)], { cwd: dir });
      expect(result.status).not.toBe(0);
      expect(result.stdout + result.stderr).toMatch(/FAILED[\s\S]*ProductServiceHighErrorRatio/);
    });
  });
});
