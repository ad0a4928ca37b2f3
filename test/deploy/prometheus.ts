// A real Prometheus for the deploy tests (installed by scripts/ci/apt-install.sh), started on a
// free loopback port with the configuration a test writes, and the parts of its HTTP API the tests read.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { PROMETHEUS_INSTALL, requireTool, run, startDaemon } from './tools';

interface PromResponse<T> {
  status: 'success' | 'error';
  data: T;
  error?: string;
}
export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
export interface RuleState {
  name: string;
  health: string;
  lastError?: string;
  lastEvaluation: string;
}
export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
}

/** Every scrape and, unless a rule group sets its own, every evaluation. */
export const SCRAPE_INTERVAL = '1s';

/** How long and how often a test asks Prometheus for a state it reaches by itself (scrapes and rule evaluations every 1 s). */
export const PROMETHEUS_WAIT = { timeout: 20_000, interval: 250 } as const;

export interface Prometheus {
  readonly url: string;
  api<T>(path: string, params?: Record<string, string>): Promise<PromResponse<T>>;
  query(expr: string): Promise<PromResponse<{ resultType: string; result: Sample[] }>>;
  alerts(): Promise<ActiveAlert[]>;
  /** What Prometheus logged (warnings and errors), for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

/** Scrapes and evaluations run every second unless `config` says otherwise; resolves once Prometheus is ready (/-/ready). */
export async function startPrometheus(dir: string, config: Record<string, unknown>, flags: string[] = []): Promise<Prometheus> {
  const prometheusBin = requireTool('prometheus', PROMETHEUS_INSTALL);
  const promtool = requireTool('promtool', PROMETHEUS_INSTALL);
  const configFile = join(dir, 'prometheus.yml');
  writeFileSync(
    configFile,
    stringify({ global: { scrape_interval: SCRAPE_INTERVAL, scrape_timeout: SCRAPE_INTERVAL, evaluation_interval: SCRAPE_INTERVAL }, ...config }),
  );
  const check = run(promtool, ['check', 'config', configFile]);
  if (check.status !== 0) throw new Error(`promtool check config: ${check.stdout}${check.stderr}`);

  const logFile = join(dir, 'prometheus.log');
  const daemon = await startDaemon(
    prometheusBin,
    (address) => [`--config.file=${configFile}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=${address}`, '--log.level=warn', ...flags],
    '/-/ready',
    logFile,
  );
  const url = `http://${daemon.address}`;

  async function api<T>(path: string, params: Record<string, string> = {}): Promise<PromResponse<T>> {
    const response = await fetch(`${url}${path}?${new URLSearchParams(params).toString()}`);
    return (await response.json()) as PromResponse<T>;
  }
  const prometheus: Prometheus = {
    url,
    api,
    query: (expr) => api('/api/v1/query', { query: expr }),
    alerts: async () => (await api<{ alerts: ActiveAlert[] }>('/api/v1/alerts')).data.alerts,
    log: () => readFileSync(logFile, 'utf8'),
    stop: () => daemon.stop(),
  };
  return prometheus;
}
