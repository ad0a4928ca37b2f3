// Every alert the chart renders, seen firing from the real service and resolving once its cause is
// gone; and, with no fault, none. One real Prometheus (scrapes and evaluations every second) loads
// the rules exactly as the chart renders them, with the `for`s and windows of live-alerts.values.yaml.
// Each scenario is a namespace of its own, with rules rendered for it, so the scenarios run side by
// side without seeing each other. Every namespace starts with a healthy pod of the built service
// (`node dist/main.js`, as production starts it), scraped and quiet; then its scenario makes it fail
// for real, as a game day would: a rollout with faults (FAULT_ERROR_RATIO, FAULT_DELAY), a killed
// process, a pod left unscraped, restarts, load, a collector (the tests' OTLP receiver) answering
// errors or hanging, a stdout nobody reads, a low memory threshold; and then ends the failure.
// Prometheus finds the pods through file-based discovery, so a scenario adds and removes pods as
// Kubernetes would; kube-state-metrics' series come from a stand-in (kube-state-metrics.ts).
//
// The suite measures how long each alert took to fire and to resolve. With LIVE_ALERTS_WRITE=1 it
// writes them into docs/runbook.md (`npm run docs:alerts`); otherwise it only prints them, so CI never
// rewrites the docs. The last test checks that the committed table names every alert the chart renders.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { readBlock, writeBlock } from '../../bench/markdown-block.mjs';
import { sampleValue, scrape } from '../support/exposition';
import { startWithFifoStdout, type FifoService } from '../support/fifo-stdout';
import { startOtlpReceiver, type OtlpReceiver, type ReceiverMode } from '../support/otlp-receiver';
import { MAIN, ROOT } from '../support/paths';
import { startService, type ServiceProcess } from '../support/service-process';
import { startKubeStateMetrics, type KubeStateMetrics } from './kube-state-metrics';
import { PROMETHEUS_WAIT, startPrometheus, type ActiveAlert, type Prometheus } from './prometheus';
import { RUNBOOK, alertsOf, interpolate, loadDashboard, parseRules, promTargets, renderRules } from './tools';

const RELEASE = 'products';
/** The release's full name: its job, its Deployment, and the prefix of its pods' names. */
const JOB = `${RELEASE}-product-service`;
const VALUES = join(__dirname, 'live-alerts.values.yaml');
const TABLE = 'live-alerts';
const WRITE_TABLE = process.env.LIVE_ALERTS_WRITE === '1';
const AUTOCANNON = join(ROOT, 'node_modules', 'autocannon', 'autocannon.js');
const MIB = 1024 * 1024;
/** The chart's default memory limit, a larger one, and what the chart's nodeHeapPercent (60%) makes of each as V8's heap. */
const MEMORY_LIMIT = 384 * MIB;
const LARGE_MEMORY_LIMIT = 4096 * MIB;
const heapOf = (limit: number): string => `--max-old-space-size=${Math.floor((limit / MIB) * 0.6)} --max-semi-space-size=16`;
/** The most an alert may take to fire, and to resolve, with these values. */
const FIRE_WITHIN_MS = 60_000;
const RESOLVE_WITHIN_MS = 90_000;
const SCENARIO_TIMEOUT_MS = 300_000;

/** One row of the table: how an alert was made to fire and to resolve, and how long each took. */
interface Row {
  alert: string;
  slo?: string;
  did: string;
  ended: string;
  fireSeconds: number;
  resolveSeconds: number;
}

/** An alert pending or firing, as one poll of /api/v1/alerts saw it. */
interface Sighting {
  at: number;
  namespace: string;
  alert: string;
  state: ActiveAlert['state'];
}

/**
 * Polls /api/v1/alerts every 250 ms and keeps every alert it saw pending or firing, with when and
 * in which namespace; scenarios wait on it for an alert to fire or to be gone.
 */
class AlertWatcher {
  readonly sightings: Sighting[] = [];
  private current: ActiveAlert[] = [];
  private readonly waiters = new Set<() => void>();
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(private readonly prometheus: Prometheus) {
    this.loop = this.poll();
  }

  private async poll(): Promise<void> {
    while (!this.stopped) {
      try {
        this.current = await this.prometheus.alerts();
      } catch {
        // Prometheus busy for a moment: the next poll will tell.
      }
      const at = Date.now();
      for (const { labels, state } of this.current) {
        this.sightings.push({ at, namespace: labels.namespace ?? '', alert: labels.alertname ?? '', state });
      }
      for (const wake of this.waiters) wake();
      await sleep(250);
    }
  }

  /** Resolves with the time of the first poll at which `check` holds; rejects after `timeoutMs`. */
  until(check: (alerts: ActiveAlert[]) => boolean, timeoutMs: number, what: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(wake);
        reject(new Error(`timed out after ${timeoutMs} ms waiting until ${what}; active alerts: ${JSON.stringify(this.current.map((a) => a.labels))}`));
      }, timeoutMs);
      const wake = (): void => {
        if (!check(this.current)) return;
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve(Date.now());
      };
      this.waiters.add(wake);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** A pod of a scenario: the built service on its own ports, known to Prometheus under `name`. */
interface Pod {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly baseUrl: string;
  readonly metricsUrl: string;
  readonly service: ServiceProcess | FifoService;
}

interface PodOptions {
  /** A FIFO the test reads and can stop reading (the log-drop scenario), or /dev/null (under heavy load); a pipe to the test otherwise. */
  stdout?: 'fifo' | 'discard';
  /** The pod's name: a new one unless given (a restarted container keeps its pod's). */
  name?: string;
}

/** POST /product at `perSecond` to the pod `target()` names at that moment, without waiting for answers, until stopped. */
function traffic(perSecond: number, target: () => Pod): { stop(): Promise<void> } {
  const inFlight = new Set<Promise<unknown>>();
  const timer = setInterval(() => {
    const sent = fetch(`${target().baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
      .then((response) => response.arrayBuffer())
      .catch(() => undefined);
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
  }, 1000 / perSecond);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
    },
  };
}

/** autocannon against POST /product, as a child process, until stopped; `rate` caps the requests per second. */
function load(pod: Pod, connections: number, rate?: number): { stop(): Promise<void> } {
  const args = [AUTOCANNON, '-c', String(connections), '-d', '600', '-m', 'POST', '-H', 'content-type=application/json', '-b', '{}'];
  if (rate !== undefined) args.push('-R', String(rate));
  const child: ChildProcess = spawn(process.execPath, [...args, `${pod.baseUrl}/product`], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Scenarios that saturate a core take turns: two at once would starve every other process here. */
let heavyTurn: Promise<unknown> = Promise.resolve();
async function oneHeavyAtATime<T>(run: () => Promise<T>): Promise<T> {
  const mine = heavyTurn.then(run, run);
  heavyTurn = mine.catch(() => undefined);
  return mine;
}

/** What a scenario's namespace starts with. */
interface Setup {
  /** kube-state-metrics reports the namespace's Deployment (one available replica) and this memory limit of its pod. */
  ksm?: number;
  /** The tests' OTLP receiver collects the pods' spans. */
  collector?: boolean;
  /** POST /product requests a second, sent to the newest pod all along. */
  traffic?: number;
  /** Alert values the rules are rendered with, beyond live-alerts.values.yaml. */
  alerts?: Record<string, Record<string, number>>;
  /** The first pod's environment and stdout. */
  env?: Record<string, string>;
  stdout?: PodOptions['stdout'];
}

const NAMESPACES = {
  quiet: { ksm: MEMORY_LIMIT, collector: true, traffic: 2 },
  down: { ksm: MEMORY_LIMIT },
  notscraped: { ksm: MEMORY_LIMIT },
  errors: { collector: true, traffic: 4 },
  slow: { traffic: 4 },
  // ProductServiceQuietFailures pages first for failures answered 5xx: out of reach here, so that
  // NoIdsIssued is seen paging on its own.
  noids: { traffic: 0.5, alerts: { ProductServiceQuietFailures: { minFailures: 1000 } } },
  quietfailures: { traffic: 0.5 },
  stopped: {},
  restarts: {},
  memory: { ksm: LARGE_MEMORY_LIMIT, alerts: { ProductServiceMemoryNearLimit: { threshold: 0.1 } } },
  heap: { alerts: { ProductServiceHeapNearLimit: { threshold: 0.05 } }, env: { NODE_OPTIONS: heapOf(LARGE_MEMORY_LIMIT) } },
  // A trickle goes on after the flood stops, as in production: the flood's end is no traffic stop.
  saturated: { stdout: 'discard', traffic: 0.5 },
  logdrop: { stdout: 'fifo', traffic: 2 },
  exportfail: { collector: true, traffic: 5 },
  spansdrop: { collector: true, traffic: 0.5 },
} satisfies Record<string, Setup>;
type NamespaceName = keyof typeof NAMESPACES;

describe('every alert the chart renders, fired by the real service', () => {
  let dir = '';
  let targetsDir = '';
  let prometheus: Prometheus;
  let ksm: KubeStateMetrics;
  let watcher: AlertWatcher;
  let devNull = -1;
  /** When every namespace had its healthy pod scraped and nothing was pending or firing: scenarios start after it. */
  let quietSince = Infinity;
  const suiteStarted = Date.now();
  const rows: Row[] = [];
  const cleanups: Array<() => Promise<unknown>> = [];
  /** The alerts of the chart with its defaults: every one must fire. */
  const alerts = alertsOf(parseRules(renderRules({ release: RELEASE, namespace: 'default' }))).map((rule) => rule.alert ?? '');

  /** A scenario's namespace: its pods, its scrape targets, its collector, what it waits for. */
  class Namespace {
    /** The pods Prometheus is told to scrape, by pod name (a restarted container keeps its pod's name). */
    private readonly scraped = new Map<string, Pod>();
    /** The pod traffic goes to: the newest one. */
    serving!: Pod;
    collector: OtlpReceiver | undefined;

    constructor(readonly name: NamespaceName) {}

    /** Starts a pod of the release (`node dist/main.js` with `env`) and makes it a scrape target. */
    async start(env: Record<string, string> = {}, options: PodOptions = {}): Promise<Pod> {
      const name = options.name ?? `${JOB}-${randomBytes(4).toString('hex')}-${randomBytes(3).toString('hex')}`;
      const otel: Record<string, string> =
        this.collector === undefined ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: this.collector.url, OTEL_BSP_SCHEDULE_DELAY: '200' };
      const fullEnv = { OTEL_SERVICE_NAME: 'product-service', ...otel, ...env };
      const launch = (): Promise<ServiceProcess | FifoService> =>
        options.stdout === 'fifo' ? startWithFifoStdout(fullEnv) : startService(fullEnv, options.stdout === 'discard' ? devNull : undefined);
      // Free ports are picked before the service binds them: with many starting at once, another
      // process can take one first. A restart on the pod's own ports gets no second try.
      const service = await launch().catch((error: unknown) => {
        if (env.PORT !== undefined) throw error;
        return launch();
      });
      cleanups.push(() => ('close' in service ? service.close() : service.stop('SIGKILL')));
      const pod: Pod = { name, env, baseUrl: `http://127.0.0.1:${service.port}`, metricsUrl: `http://127.0.0.1:${service.metricsPort}/metrics`, service };
      this.scraped.set(name, pod);
      this.writeTargets();
      this.serving = pod;
      return pod;
    }

    /** Kills the pod's process (SIGKILL); it stays a scrape target, as a crashed container does. */
    async kill(pod: Pod): Promise<void> {
      if ('close' in pod.service) await pod.service.close();
      else await pod.service.stop('SIGKILL');
    }

    /** Kills the pod's process and starts it again on the same ports, as the kubelet restarts a container. */
    async restart(pod: Pod): Promise<Pod> {
      await this.kill(pod);
      return this.start({ ...pod.env, PORT: new URL(pod.baseUrl).port, METRICS_PORT: new URL(pod.metricsUrl).port }, { name: pod.name });
    }

    /** The scrape targets of this namespace, for file-based discovery: one file per namespace, replaced whole. */
    private writeTargets(): void {
      const file = join(targetsDir, `${this.name}.json`);
      const targets = [...this.scraped.values()].map((pod) => ({ targets: [new URL(pod.metricsUrl).host], labels: { namespace: this.name, pod: pod.name } }));
      writeFileSync(`${file}.tmp`, JSON.stringify(targets));
      renameSync(`${file}.tmp`, file);
    }

    /** Makes `pod` a scrape target again. */
    scrape(pod: Pod): void {
      this.scraped.set(pod.name, pod);
      this.writeTargets();
    }

    /** Removes `pod` from the scrape targets; once Prometheus drops the target, the pod's series go stale. */
    unscrape(pod: Pod): void {
      this.scraped.delete(pod.name);
      this.writeTargets();
    }

    /**
     * Waits until Prometheus no longer scrapes `pod` (discovery applies changes within seconds). A pod
     * stopped before that is a target that fails its scrapes; Kubernetes avoids it in a rollout by
     * keeping the old pod serving while it leaves the endpoints (the chart's SHUTDOWN_DELAY).
     */
    async dropped(pod: Pod): Promise<void> {
      await vi.waitFor(async () => expect((await prometheus.query(`up{job="${JOB}", namespace="${this.name}", pod="${pod.name}"}`)).data.result).toEqual([]), {
        ...PROMETHEUS_WAIT,
        message: `Prometheus still scrapes ${this.name}/${pod.name}`,
      });
    }

    /** Waits until Prometheus has scraped the pod's current process (it reports the process' start time). */
    async scrapedOnce(pod: Pod): Promise<void> {
      const started = sampleValue(await scrape(pod.metricsUrl), 'process_start_time_seconds');
      await vi.waitFor(
        async () => {
          const result = await prometheus.query(`process_start_time_seconds{job="${JOB}", namespace="${this.name}", pod="${pod.name}"}`);
          expect(Number(result.data.result[0]?.value[1])).toBe(started);
        },
        { ...PROMETHEUS_WAIT, message: `Prometheus never scraped ${this.name}/${pod.name}` },
      );
    }

    /**
     * A rollout as the chart's Deployment makes it (surge first, never below the desired count): a
     * pod with `env` starts and takes the traffic once it answers; once Prometheus has scraped it,
     * the old pod is removed and stopped. Resolves with the moment the new pod took the traffic.
     */
    async rollout(env: Record<string, string>): Promise<number> {
      const old = this.serving;
      const next = await this.start(env);
      const switched = Date.now();
      await this.scrapedOnce(next);
      this.unscrape(old);
      await this.dropped(old);
      await this.kill(old);
      return switched;
    }

    /** Waits for `alert` (of `slo`, for the burn-rate alerts) to fire in this namespace; resolves with the seconds since `since`. */
    async fired(alert: string, since: number, slo?: string): Promise<number> {
      const at = await watcher.until(
        (active) => active.some((a) => this.matches(a, alert, slo) && a.state === 'firing'),
        FIRE_WITHIN_MS,
        `${alert} fires in ${this.name}`,
      );
      return (at - since) / 1000;
    }

    /** Makes the namespace's collector answer every export as `mode` says; returns the moment. */
    answering(mode: ReceiverMode): number {
      (this.collector as OtlpReceiver).mode = mode;
      return Date.now();
    }

    /** Waits until `alert` is neither pending nor firing in this namespace; resolves with the seconds since `since`. */
    async resolved(alert: string, since: number, slo?: string): Promise<number> {
      const at = await watcher.until((active) => !active.some((a) => this.matches(a, alert, slo)), RESOLVE_WITHIN_MS, `${alert} resolves in ${this.name}`);
      return (at - since) / 1000;
    }

    private matches(active: ActiveAlert, alert: string, slo: string | undefined): boolean {
      return active.labels.namespace === this.name && active.labels.alertname === alert && (slo === undefined || active.labels.slo === slo);
    }

    /** The alerts that fired in this namespace since every namespace was quiet. */
    firedHere(): string[] {
      const names = watcher.sightings.filter((s) => s.namespace === this.name && s.state === 'firing' && s.at >= quietSince).map((s) => s.alert);
      return [...new Set(names)].sort();
    }
  }

  /**
   * The runbook's walk from the dashboard to a failing request: an exemplar of the latency heatmap
   * (the dashboard's own query) on a 500 leads to a trace whose server span failed, and to the
   * pod's log lines of that trace, which say the failure was injected.
   */
  async function followAnExemplar(space: Namespace): Promise<void> {
    const heatmap = promTargets(loadDashboard()).find(({ panel }) => panel.title === 'POST /product latency heatmap');
    const expr = interpolate(heatmap?.expr ?? '', { job: JOB, namespace: space.name, pod: '.*', instance: '.*' }, '1m');
    const exemplars = await vi.waitFor(
      async () => {
        const result = await prometheus.api<Array<{ seriesLabels: Record<string, string>; exemplars: Array<{ labels: Record<string, string> }> }>>(
          '/api/v1/query_exemplars',
          { query: expr, start: String((Date.now() - 120_000) / 1000), end: String(Date.now() / 1000) },
        );
        const failed = result.data.filter((series) => series.seriesLabels.http_response_status_code === '500').flatMap((series) => series.exemplars);
        expect(failed.length).toBeGreaterThan(0);
        return failed;
      },
      { ...PROMETHEUS_WAIT, message: 'no exemplar of a 500 on the latency heatmap' },
    );
    const traceId = exemplars[0]?.labels.trace_id ?? '';
    const spans = (await space.collector?.waitForSpans((span) => span.traceId === traceId)) ?? [];
    expect(spans.find((span) => span.traceId === traceId)).toMatchObject({ name: 'POST /product', status: { code: 2 } });
    const lines = (space.serving.service as ServiceProcess).logLines().filter((line) => line.trace_id === traceId);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'unexpected error while serving a request',
        err: expect.objectContaining({ type: 'InjectedFault' }) as unknown,
      }),
      expect.objectContaining({ level: 'info', msg: 'request completed', status: 500 }),
    ]);
  }

  const ns = Object.fromEntries(Object.keys(NAMESPACES).map((name) => [name, new Namespace(name as NamespaceName)])) as Record<NamespaceName, Namespace>;
  const steadyTraffic: Array<{ stop(): Promise<void> }> = [];

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/main.js is missing: run `npm run build` first');
    dir = mkdtempSync(join(tmpdir(), 'live-alerts-'));
    targetsDir = join(dir, 'targets');
    mkdirSync(targetsDir);
    devNull = openSync('/dev/null', 'w');
    ksm = await startKubeStateMetrics();
    cleanups.push(() => ksm.close());

    // Every namespace's healthy pod, before Prometheus starts: each is scraped from its first evaluation on.
    // allSettled: a start that fails must not leave the others running unrecorded for afterAll.
    const settled = await Promise.allSettled(
      Object.keys(NAMESPACES).map(async (name) => {
        const space = ns[name as NamespaceName];
        const setup: Setup = NAMESPACES[name as NamespaceName];
        if (setup.collector === true) {
          const collector = await startOtlpReceiver('ok');
          cleanups.push(() => collector.close());
          space.collector = collector;
        }
        const pod = await space.start(setup.env, { stdout: setup.stdout });
        if (setup.ksm !== undefined) {
          ksm.setAvailableReplicas(name, JOB, 1);
          ksm.addPod(name, pod.name, setup.ksm);
        }
        // A values file rather than --set, which passes decimals as strings.
        const values = join(dir, `values-${name}.yaml`);
        writeFileSync(values, stringify({ monitoring: { prometheusRule: { alerts: setup.alerts ?? {} } } }));
        const rules = join(dir, `rules-${name}.yaml`);
        writeFileSync(rules, renderRules({ release: RELEASE, namespace: name, values: [VALUES, values] }));
        return rules;
      }),
    );
    const failed = settled.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const ruleFiles = settled.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));

    prometheus = await startPrometheus(
      dir,
      {
        rule_files: ruleFiles,
        scrape_configs: [
          // The job the chart's ServiceMonitor produces: the release's full name.
          { job_name: JOB, file_sd_configs: [{ files: [join(targetsDir, '*.json')], refresh_interval: '1s' }] },
          // kube-state-metrics' own labels (namespace, pod) are kept, as kube-prometheus-stack does.
          { job_name: 'kube-state-metrics', honor_labels: true, static_configs: [{ targets: [ksm.target] }] },
        ],
      },
      ['--enable-feature=exemplar-storage'],
    );
    cleanups.push(() => prometheus.stop());
    watcher = new AlertWatcher(prometheus);
    cleanups.push(() => watcher.stop());

    await Promise.all(Object.values(ns).map((space) => space.scrapedOnce(space.serving)));
    for (const name of Object.keys(NAMESPACES) as NamespaceName[]) {
      const perSecond = (NAMESPACES[name] as Setup).traffic;
      if (perSecond !== undefined) steadyTraffic.push(traffic(perSecond, () => ns[name].serving));
    }
    // Before its first scrape a namespace has no `up` series: ProductServiceDown is pending for a
    // moment, and must be gone before the scenarios begin.
    quietSince = await watcher.until((active) => active.length === 0, 30_000, 'no alert is pending or firing after every pod was scraped');
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled(steadyTraffic.map((requests) => requests.stop()));
    await Promise.allSettled(cleanups.map((cleanup) => cleanup()));
    if (devNull >= 0) closeSync(devNull);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it.concurrent(
    'ProductServiceTargetDown: one of two pods killed; ProductServiceDown, alone, when the last pod is killed; then scaled to zero',
    async () => {
      const space = ns.down;
      let pod = space.serving;
      // A second replica, killed: the service still serves, one warning.
      const second = await space.start();
      await space.scrapedOnce(second);
      let t0 = Date.now();
      await space.kill(second);
      const targetFired = await space.fired('ProductServiceTargetDown', t0);
      let t1 = Date.now();
      space.unscrape(second);
      await space.dropped(second);
      const targetResolved = await space.resolved('ProductServiceTargetDown', t1);
      space.serving = pod;

      // The only pod killed: one outage, one page. TargetDown stays silent while Down's condition holds.
      t0 = Date.now();
      // What kube-state-metrics reports once the pod's readiness probe fails; set first, so that no
      // scrape sees the pod gone while still available.
      ksm.setAvailableReplicas(space.name, JOB, 0);
      await space.kill(pod);
      const downFired = await space.fired('ProductServiceDown', t0);
      t1 = Date.now();
      pod = await space.restart(pod);
      ksm.setAvailableReplicas(space.name, JOB, 1);
      const downResolved = await space.resolved('ProductServiceDown', t1);
      rows.push(
        {
          alert: 'ProductServiceDown',
          did: 'Killed the only pod (SIGKILL); kube-state-metrics: no available replica',
          ended: 'Pod started again',
          fireSeconds: downFired,
          resolveSeconds: downResolved,
        },
        {
          alert: 'ProductServiceTargetDown',
          did: 'Killed one of two pods (SIGKILL)',
          ended: 'The pod left the scrape targets (deleted)',
          fireSeconds: targetFired,
          resolveSeconds: targetResolved,
        },
      );
      const targetDownSightings = (): number =>
        watcher.sightings.filter((s) => s.namespace === space.name && s.alert === 'ProductServiceTargetDown' && s.state === 'firing' && s.at >= t0).length;
      expect(targetDownSightings()).toBe(0);

      // Scaled to zero: no pod, so no target and no `up` series at all.
      t0 = Date.now();
      space.unscrape(pod);
      ksm.setAvailableReplicas(space.name, JOB, 0);
      await space.dropped(pod);
      await space.kill(pod);
      const scaledFired = await space.fired('ProductServiceDown', t0);
      t1 = Date.now();
      await space.start();
      ksm.setAvailableReplicas(space.name, JOB, 1);
      const scaledResolved = await space.resolved('ProductServiceDown', t1);
      rows.push({
        alert: 'ProductServiceDown',
        did: 'Scaled to zero: the pod deleted, nothing left to scrape; no available replica',
        ended: 'A pod scheduled and scraped again',
        fireSeconds: scaledFired,
        resolveSeconds: scaledResolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceDown', 'ProductServiceTargetDown']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceNotScraped: the pod runs (kube-state-metrics sees it available) but is no scrape target',
    async () => {
      const space = ns.notscraped;
      const t0 = Date.now();
      space.unscrape(space.serving);
      const fired = await space.fired('ProductServiceNotScraped', t0);
      const t1 = Date.now();
      space.scrape(space.serving);
      const resolved = await space.resolved('ProductServiceNotScraped', t1);
      rows.push({
        alert: 'ProductServiceNotScraped',
        did: 'Pod running, one available replica, removed from the scrape targets',
        ended: 'Scraped again',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      // Running, so not down: one alert, not two.
      expect(space.firedHere()).toEqual(['ProductServiceNotScraped']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  /**
   * Both burn-rate alerts of one SLO: a rollout with `fault` under the namespace's steady traffic,
   * then one without it. `whileFiring` runs before the fault is rolled back.
   */
  async function burnBoth(space: Namespace, slo: string, fault: Record<string, string>, did: string, whileFiring?: () => Promise<void>): Promise<void> {
    const names = ['ProductServiceErrorBudgetBurnFast', 'ProductServiceErrorBudgetBurnSlow'];
    const t0 = await space.rollout(fault);
    const fired = await Promise.all(names.map((alert) => space.fired(alert, t0, slo)));
    await whileFiring?.();
    const t1 = await space.rollout({});
    const resolved = await Promise.all(names.map((alert) => space.resolved(alert, t1, slo)));
    names.forEach((alert, i) =>
      rows.push({ alert, slo, did, ended: 'Rolled out without the fault', fireSeconds: fired[i] ?? NaN, resolveSeconds: resolved[i] ?? NaN }),
    );
    expect(space.firedHere()).toEqual(names);
  }

  it.concurrent(
    'the availability burn rates: a rollout with FAULT_ERROR_RATIO=1 under traffic; ProductServiceNoIdsIssued stays silent (one page); an exemplar leads to the failed trace and its log lines',
    () =>
      burnBoth(ns.errors, 'availability', { FAULT_ERROR_RATIO: '1' }, 'Rolled out `FAULT_ERROR_RATIO=1` under 4 POST /product a second', () =>
        followAnExemplar(ns.errors),
      ),
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'the latency burn rates: a rollout with FAULT_DELAY past the latency threshold under traffic',
    () => burnBoth(ns.slow, 'latency', { FAULT_DELAY: '0.3' }, 'Rolled out `FAULT_DELAY=0.3` (the latency threshold is 0.25 s) under 4 POST /product a second'),
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceNoIdsIssued: a rollout with FAULT_ERROR_RATIO=1 under the traffic guard of the burn rates',
    async () => {
      const space = ns.noids;
      const t0 = await space.rollout({ FAULT_ERROR_RATIO: '1' });
      const fired = await space.fired('ProductServiceNoIdsIssued', t0);
      const t1 = await space.rollout({});
      const resolved = await space.resolved('ProductServiceNoIdsIssued', t1);
      rows.push({
        alert: 'ProductServiceNoIdsIssued',
        did: 'Rolled out `FAULT_ERROR_RATIO=1` under one POST /product every 2 s (below `minRequestRate`, 1/s here)',
        ended: 'Rolled out without the fault',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceNoIdsIssued']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceQuietFailures: a rollout with FAULT_ERROR_RATIO=0.5 under the traffic guard of the burn rates',
    async () => {
      const space = ns.quietfailures;
      const t0 = await space.rollout({ FAULT_ERROR_RATIO: '0.5' });
      const fired = await space.fired('ProductServiceQuietFailures', t0, 'availability');
      const t1 = await space.rollout({});
      const resolved = await space.resolved('ProductServiceQuietFailures', t1, 'availability');
      rows.push({
        alert: 'ProductServiceQuietFailures',
        slo: 'availability',
        did: 'Rolled out `FAULT_ERROR_RATIO=0.5` under one POST /product every 2 s (below `minRequestRate`, 1/s here)',
        ended: 'Rolled out without the fault',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      // Ids are still issued: NoIdsIssued stays silent, and the burn rates are under their guard.
      expect(space.firedHere()).toEqual(['ProductServiceQuietFailures']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceTrafficStopped: POST /product stops reaching a healthy pod after a sustained rate',
    async () => {
      const space = ns.stopped;
      const requests = traffic(4, () => space.serving);
      // The prior window (20 s here) filled with traffic, then nothing arrives; the pod stays up.
      await sleep(25_000);
      await requests.stop();
      const t0 = Date.now();
      const fired = await space.fired('ProductServiceTrafficStopped', t0);
      const t1 = Date.now();
      // It runs on to the end of the suite (afterAll stops it): the namespace ends as it started, served.
      steadyTraffic.push(traffic(4, () => space.serving));
      const resolved = await space.resolved('ProductServiceTrafficStopped', t1);
      rows.push({
        alert: 'ProductServiceTrafficStopped',
        did: 'Stopped 4 POST /product a second after 25 s of them; the pod kept answering scrapes',
        ended: 'Traffic again',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceTrafficStopped']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServicePodRestarting: the pod killed and started again three times',
    async () => {
      const space = ns.restarts;
      let pod = space.serving;
      const t0 = Date.now();
      for (let i = 0; i < 3; i += 1) {
        // process_start_time_seconds has whole seconds: each start must be in a second of its own.
        await sleep(1100);
        pod = await space.restart(pod);
        await space.scrapedOnce(pod);
      }
      const fired = await space.fired('ProductServicePodRestarting', t0);
      const t1 = Date.now();
      const resolved = await space.resolved('ProductServicePodRestarting', t1);
      rows.push({
        alert: 'ProductServicePodRestarting',
        did: 'Killed the pod (SIGKILL) and started it again, three times',
        ended: 'No more restarts (the window is 40 s here)',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServicePodRestarting']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceMemoryNearLimit: a low threshold, and the memory limit kube-state-metrics reports lowered',
    async () => {
      const space = ns.memory;
      const t0 = Date.now();
      ksm.addPod(space.name, space.serving.name, MEMORY_LIMIT);
      const fired = await space.fired('ProductServiceMemoryNearLimit', t0);
      const t1 = Date.now();
      ksm.addPod(space.name, space.serving.name, LARGE_MEMORY_LIMIT);
      const resolved = await space.resolved('ProductServiceMemoryNearLimit', t1);
      rows.push({
        alert: 'ProductServiceMemoryNearLimit',
        did: 'Threshold 0.1; the limit kube-state-metrics reports lowered from 4 GiB to 384 MiB',
        ended: 'Limit raised to 4 GiB again',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceMemoryNearLimit']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    "ProductServiceHeapNearLimit: a low threshold, and a rollout with a pod's V8 heap sized for a smaller memory limit",
    async () => {
      const space = ns.heap;
      const t0 = await space.rollout({ NODE_OPTIONS: heapOf(MEMORY_LIMIT) });
      const fired = await space.fired('ProductServiceHeapNearLimit', t0);
      const t1 = await space.rollout({ NODE_OPTIONS: heapOf(LARGE_MEMORY_LIMIT) });
      const resolved = await space.resolved('ProductServiceHeapNearLimit', t1);
      rows.push({
        alert: 'ProductServiceHeapNearLimit',
        did: `Threshold 0.05; rolled out the heap of a 384 MiB pod (\`${heapOf(MEMORY_LIMIT)}\`)`,
        ended: 'Rolled out the heap of a 4 GiB pod',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceHeapNearLimit']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceEventLoopSaturated: more load than one event loop can take',
    async () => {
      const space = ns.saturated;
      const { fired, resolved } = await oneHeavyAtATime(async () => {
        const t0 = Date.now();
        const flood = load(space.serving, 32);
        try {
          const firedAfter = await space.fired('ProductServiceEventLoopSaturated', t0);
          await flood.stop();
          const t1 = Date.now();
          return { fired: firedAfter, resolved: await space.resolved('ProductServiceEventLoopSaturated', t1) };
        } finally {
          await flood.stop();
        }
      });
      rows.push({
        alert: 'ProductServiceEventLoopSaturated',
        did: 'autocannon, 32 connections of POST /product',
        ended: 'Load stopped',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceEventLoopSaturated']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceLogLinesDropped: stdout is a FIFO nobody reads',
    async () => {
      const space = ns.logdrop;
      const pod = space.serving;
      const fifo = pod.service as FifoService;
      const { fired, resolved } = await oneHeavyAtATime(async () => {
        const t0 = Date.now();
        fifo.pauseReader();
        // Enough request lines to fill the 8 MiB buffer quickly; after it, the steady traffic keeps
        // writing lines that stdout cannot take.
        const flood = load(pod, 16);
        try {
          await vi.waitFor(async () => expect(sampleValue(await scrape(pod.metricsUrl), 'product_service_log_lines_dropped_total')).toBeGreaterThan(0), {
            timeout: 60_000,
            interval: 250,
          });
        } finally {
          await flood.stop();
        }
        const firedAfter = await space.fired('ProductServiceLogLinesDropped', t0);
        const t1 = Date.now();
        fifo.resumeReader();
        return { fired: firedAfter, resolved: await space.resolved('ProductServiceLogLinesDropped', t1) };
      });
      rows.push({
        alert: 'ProductServiceLogLinesDropped',
        did: 'stdout a FIFO nobody reads; load until its 8 MiB buffer is full, then 2 POST /product a second',
        ended: 'The reader reads again',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      // The load that fills the buffer saturates the event loop while it runs: that alert may fire too.
      expect(space.firedHere().filter((name) => name !== 'ProductServiceEventLoopSaturated')).toEqual(['ProductServiceLogLinesDropped']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceTelemetryExportFailing: the collector answers 503',
    async () => {
      const space = ns.exportfail;
      const fired = await space.fired('ProductServiceTelemetryExportFailing', space.answering('error'));
      const resolved = await space.resolved('ProductServiceTelemetryExportFailing', space.answering('ok'));
      rows.push({
        alert: 'ProductServiceTelemetryExportFailing',
        did: 'OTLP receiver answers 503 to every export, under 5 POST /product a second',
        ended: 'Receiver answers 200 again',
        fireSeconds: fired,
        resolveSeconds: resolved,
      });
      expect(space.firedHere()).toEqual(['ProductServiceTelemetryExportFailing']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it.concurrent(
    'ProductServiceSpansDropped: the collector hangs while traffic fills the export queue',
    async () => {
      const space = ns.spansdrop;
      // It takes its turn with the floods: 400 requests a second on a core they starve read as a
      // saturated event loop, a second alert in this namespace.
      await oneHeavyAtATime(async () => {
        const t0 = space.answering('hang');
        const requests = load(space.serving, 8, 400);
        try {
          const fired = await space.fired('ProductServiceSpansDropped', t0);
          const resolved = await space.resolved('ProductServiceSpansDropped', space.answering('ok'));
          rows.push({
            alert: 'ProductServiceSpansDropped',
            did: 'OTLP receiver never answers, under 400 POST /product a second',
            ended: 'Receiver answers again',
            fireSeconds: fired,
            resolveSeconds: resolved,
          });
        } finally {
          await requests.stop();
        }
      });
      // The exports that hang time out and fail: the export alert may fire too.
      expect(space.firedHere().filter((name) => name !== 'ProductServiceTelemetryExportFailing')).toEqual(['ProductServiceSpansDropped']);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it('with no fault, nothing was pending or firing, all through the suite', () => {
    expect(watcher.sightings.filter((s) => s.namespace === 'quiet' && s.at >= quietSince)).toEqual([]);
  });

  it('every alert the chart renders fired and resolved', () => {
    const seconds = (value: number): string => String(Math.max(0, Math.round(value)));
    const order = (row: Row): number => alerts.indexOf(row.alert);
    const sorted = [...rows].sort((a, b) => order(a) - order(b) || (a.slo ?? '').localeCompare(b.slo ?? ''));
    expect([...new Set(sorted.map((row) => row.alert))]).toEqual(alerts);
    const suiteSeconds = Math.round((Date.now() - suiteStarted) / 1000);
    const table = [
      '| Alert | What the suite did | How it ended | Fired after (s) | Resolved after (s) |',
      '| ----- | ------------------ | ------------ | --------------: | -----------------: |',
      ...sorted.map(
        (row) =>
          `| ${row.alert}${row.slo === undefined ? '' : ` (${row.slo})`} | ${row.did} | ${row.ended} | ${seconds(row.fireSeconds)} | ${seconds(row.resolveSeconds)} |`,
      ),
    ].join('\n');
    const md = `${table}\n\nRules rendered with \`test/deploy/live-alerts.values.yaml\`; scrapes and evaluations every second. The suite took ${suiteSeconds} s.`;
    console.log(md);
    if (WRITE_TABLE) writeBlock(RUNBOOK, TABLE, md);
  });
});

describe("the runbook's table of alerts seen firing", () => {
  it('names every alert the chart renders, each with the seconds it took to fire and to resolve', () => {
    const alerts = alertsOf(parseRules(renderRules({ release: RELEASE, namespace: 'default' }))).map((rule) => rule.alert ?? '');
    const rows = readBlock(RUNBOOK, TABLE)
      .split('\n')
      .filter((line) => line.startsWith('| ProductService'))
      .map((line) => line.split('|').map((cell) => cell.trim()));
    expect([...new Set(rows.map((cells) => (cells[1] ?? '').replace(/ \(.*\)$/, '')))]).toEqual(alerts);
    for (const cells of rows) expect(cells.slice(4, 6), cells[1]).toEqual([expect.stringMatching(/^\d+$/), expect.stringMatching(/^\d+$/)]);
  });
});
