import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, vi } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../support/paths';
import { freePort } from '../support/service-process';

/** The compose stack's rule file, rendered from the chart (scripts/render-rules.mjs), and the values it is rendered with. */
export const DEPLOY_RULES = join(ROOT, 'deploy', 'prometheus', 'rules', 'product-service.yaml');
export const DEPLOY_RULE_VALUES = join(ROOT, 'deploy', 'prometheus', 'chart-values.yaml');
/** Values that turn on the synthetic probe (monitoring.probe), and with it ProductServiceProbeFailing. */
export const PROBE_RULE_VALUES = join(ROOT, 'test', 'deploy', 'rules', 'probe.values.yaml');
/** The dashboard: the chart's file, which the compose stack's Grafana provisions as it is. */
export const DASHBOARD = join(ROOT, 'helm', 'product-service', 'files', 'dashboards', 'product-service.json');
export const RUNBOOK = join(ROOT, 'docs', 'runbook.md');
export const COMPOSE = join(ROOT, 'deploy', 'compose.yaml');
const RENDER_RULES = join(ROOT, 'scripts', 'render-rules.mjs');

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  keep_firing_for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleFile {
  groups: Array<{ name: string; interval?: string; rules: Rule[] }>;
}

/** Values files and --set pairs go on top of the chart's defaults (scripts/render-rules.mjs runs `helm template`). */
export function renderRules(options: { release: string; namespace: string; values?: string[]; set?: string[] }): string {
  const args = [RENDER_RULES, '--stdout', '--release', options.release, '--namespace', options.namespace];
  for (const file of options.values ?? []) args.push('--values', file);
  for (const pair of options.set ?? []) args.push('--set', pair);
  const result = run(process.execPath, args);
  if (result.status !== 0) throw new Error(`render-rules failed: ${result.stderr}`);
  return result.stdout;
}

export const parseRules = (text: string): RuleFile => parse(text) as RuleFile;
export const alertsOf = (rules: RuleFile): Rule[] => rules.groups.flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));
export const readRules = (path: string): RuleFile => parseRules(readFileSync(path, 'utf8'));

/** The path of a command on PATH; throws (never skips) with the way to get it when it is missing. */
export function requireTool(name: string, install: string): string {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || path === '') throw new Error(`${name} is not installed; run ${install}`);
  return path;
}

export const PROMETHEUS_INSTALL = 'sh scripts/ci/apt-install.sh prometheus prometheus-alertmanager prometheus-blackbox-exporter (as root)';

export interface Daemon {
  /** host:port on loopback. */
  readonly address: string;
  stop(): Promise<void>;
}

/**
 * Starts `bin` with the arguments `args` makes of a free loopback address, and resolves once
 * `readyPath` there answers 200; fails if the daemon exits first, showing `log` (its output) when given.
 */
export async function startDaemon(bin: string, args: (address: string) => string[], readyPath: string, log?: string): Promise<Daemon> {
  const address = `127.0.0.1:${await freePort()}`;
  const child = spawn(bin, args(address), { stdio: ['ignore', log === undefined ? 'ignore' : 'pipe', log === undefined ? 'ignore' : 'pipe'] });
  if (log !== undefined) {
    const file = createWriteStream(log);
    // The copy of the daemon's output is for failure messages only: a full disk must not fail the test run.
    file.on('error', () => undefined);
    child.stdout?.pipe(file);
    child.stderr?.pipe(file);
  }
  await vi.waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`${bin} exited with ${child.exitCode}${log === undefined ? '' : `: ${readFileSync(log, 'utf8')}`}`);
      expect((await fetch(`http://${address}${readyPath}`)).status).toBe(200);
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

/** Runs a command to completion; the output is returned so that a failing assertion shows it. */
export function run(
  command: string,
  args: string[],
  options: { cwd?: string; input?: string; timeoutMs?: number } = {},
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(command, args, {
    cwd: options.cwd ?? ROOT,
    input: options.input,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface DatasourceRef {
  type?: string;
  uid?: string;
}
export interface Target {
  datasource?: DatasourceRef;
  expr?: string;
  query?: string;
  exemplar?: boolean;
  format?: string;
}
export interface Panel {
  id?: number;
  type: string;
  title: string;
  datasource?: DatasourceRef;
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  type: string;
  name: string;
  query: unknown;
  includeAll?: boolean;
  multi?: boolean;
  allValue?: string;
  datasource?: DatasourceRef;
}
export interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

export const loadDashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;

/** Every panel, including those nested in collapsed rows. */
export function allPanels(dashboard: Dashboard): Panel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/** The PromQL targets of the dashboard (those on the Prometheus data source variable). */
export function promTargets(dashboard: Dashboard): Array<{ panel: Panel; target: Target; expr: string }> {
  return allPanels(dashboard).flatMap((panel) =>
    (panel.targets ?? [])
      .filter((target) => (target.datasource ?? panel.datasource)?.type === 'prometheus')
      .map((target) => ({ panel, target, expr: target.expr ?? '' })),
  );
}

/** As Grafana does before it sends a query; `values` are the filter variables' regexes (".*" is "All", see allValue). */
export function interpolate(expr: string, values: Record<string, string>, rateInterval: string): string {
  return expr.replace(/\$__rate_interval/g, rateInterval).replace(/\$\{?(\w+)\}?/g, (whole, name: string) => values[name] ?? whole);
}
