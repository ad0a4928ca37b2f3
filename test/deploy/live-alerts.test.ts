// Every alert the chart renders, seen firing from the real service and resolving once its cause is
// gone; and, with no fault, none. Each scenario gets a namespace of its own, with rules rendered for
// it, so the scenarios run side by side without seeing each other.
//
// With LIVE_ALERTS_WRITE=1 (`npm run docs:alerts`) the suite writes how long each alert took to fire
// and to resolve into docs/runbook.md; otherwise it only prints them, so CI never rewrites the docs.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer, get } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse, stringify } from 'yaml';
import { readBlock, writeBlock } from '../../bench/markdown-block.mjs';
import { sampleValue, scrape } from '../support/exposition';
import { startWithFifoStdout, type FifoService } from '../support/fifo-stdout';
import { startOtlpReceiver, type OtlpReceiver, type ReceiverMode } from '../support/otlp-receiver';
import { ROOT } from '../support/paths';
import { freePort, startService, type ServiceProcess } from '../support/service-process';
import { ALERTMANAGER_CONFIG, startAlertmanager } from './alertmanager';
import { probeScrapeConfig, renderProbe, startBlackboxExporter } from './blackbox-exporter';
import { startKubeStateMetrics, type KubeStateMetrics } from './kube-state-metrics';
import { PROMETHEUS_WAIT, SCRAPE_INTERVAL, startPrometheus, type ActiveAlert, type Prometheus } from './prometheus';
import { PROBE_RULE_VALUES, RUNBOOK, alertsOf, parseRules, renderRules, type Rule, type RuleFile } from './tools';

const RELEASE = 'products';
/** The release's full name: its job, its Deployment, and the prefix of its pods' names. */
const JOB = `${RELEASE}-product-service`;
const TABLE = 'live-alerts';
const MIB = 1024 * 1024;
/** The chart's default memory limit, a larger one, and what the chart's nodeHeapPercent (60%) makes of each as V8's heap. */
const MEMORY_LIMIT = 384 * MIB;
const LARGE_MEMORY_LIMIT = 4096 * MIB;
const heapOf = (limit: number): string => `--max-old-space-size=${Math.floor((limit / MIB) * 0.6)} --max-semi-space-size=16`;
/** The SLI's request rate over the shortest window, the recording the rules derive every window from. */
const REQUESTS_RECORD = parseRules(renderRules({ release: RELEASE, namespace: 'default', values: [join(__dirname, 'live-alerts.values.yaml')] }))
  .groups.flatMap((group) => group.rules)
  .find((rule) => rule.record?.startsWith('job_namespace:product_service_slo_requests:'))?.record;
/** The core the flood's pod and load generator share: the last, away from the first that most processes start on. */
const ONE_CORE = String(availableParallelism() - 1);
/** What the blackbox exporter waits for an answer here: the probe's 1 s scrape timeout less its 0.5 s. */
const PROBE_TIMEOUT_MS = 500;
/** The flood's connections are added this many at a time, up to FLOOD_MAX. */
const FLOOD_STEP = 256;
const FLOOD_MAX = 2048;
const BURN_RATES = ['ProductServiceErrorBudgetBurnFast', 'ProductServiceErrorBudgetBurnSlow'];
const VALUES_FILE = join(__dirname, 'live-alerts.values.yaml');
interface LiveRules {
  interval: string;
  minRequestRate: number;
  alerts: { ProductServiceQuietFailures: { window: string }; ProductServicePodRestarting: { window: string } };
}
const LIVE_RULES = (parse(readFileSync(VALUES_FILE, 'utf8')) as { monitoring: { prometheusRule: LiveRules } }).monitoring.prometheusRule;
/** Seconds in a Prometheus duration such as 40s or 1m30s (by hand: the one parser the suite needs, a line). */
const seconds = (duration = '0s'): number =>
  [...duration.matchAll(/(\d+)(ms|s|m|h|d)/g)].reduce((sum, [, n, unit]) => sum + Number(n) * { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[unit as 's'], 0);
/**
 * What a machine at load 11-20 on its two cores adds to an alert's own timing, on top of the rule's
 * windows: scrapes and evaluations seconds late, Prometheus' API slow to answer. At load 19 a 3 s
 * `for` with no window was not seen firing within 37 s (30 s of margin).
 */
const MARGIN_SECONDS = 60;
/**
 * How long an alert may take to fire once its cause acted, or to resolve once it ended, by its rule:
 * its `for` (firing) or `keep_firing_for` (resolving), the longest window its expression reads plus
 * the window of the recordings it reads, a scrape and an evaluation on each side, and the margin.
 */
function patience(rule: Rule | undefined, resolving: boolean): number {
  if (rule === undefined) throw new Error('no such alert in the rules rendered for this namespace');
  const windows = [...rule.expr.matchAll(/\[(\w+)\]/g)].map(([, range]) => seconds(range));
  const recordings = [...rule.expr.matchAll(/:(?:ratio_)?rate(\d+\w)\b/g)].map(([, range]) => seconds(range));
  const reach = Math.max(0, ...windows, ...recordings) + (recordings.length > 0 ? Math.min(...recordings) : 0);
  const held = resolving ? seconds(rule.keep_firing_for) : seconds(rule.for);
  return (held + reach + 2 * (seconds(SCRAPE_INTERVAL) + seconds(LIVE_RULES.interval)) + MARGIN_SECONDS) * 1000;
}
// Proven by promtool, not by a scenario here: ProductServiceSLIAbsent needs the SLI series dropped while
// the pod is scraped (a relabelling; test/deploy/rules/alerts.test.yaml), and the two replica alerts read
// a Deployment's kube-state-metrics series, which no pod of this suite has (test/deploy/rules/replicas.test.yaml).
const PROMTOOL_ONLY = new Set(['ProductServiceSLIAbsent', 'ProductServiceNoReplicaAvailable', 'ProductServiceReplicasMismatch']);
/** Every alert, the synthetic probe's included. */
const ALERTS = alertsOf(parseRules(renderRules({ release: RELEASE, namespace: 'default', values: [PROBE_RULE_VALUES] })))
  .map((rule) => rule.alert ?? '')
  .filter((alert) => !PROMTOOL_ONLY.has(alert));

interface Pod {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly baseUrl: string;
  readonly metricsUrl: string;
  readonly service: ServiceProcess | FifoService;
  /** Liveness on a listener of its own (PROBE_PORT), where the Setup asks for one. */
  readonly livenessUrl?: string;
}

interface Setup {
  /** kube-state-metrics reports the namespace's Deployment (one available replica) and this memory limit of its pod. */
  ksm?: number;
  collector?: boolean;
  /** POST /product requests a second, sent to the newest pod all along. */
  traffic?: number;
  /** Alert values the rules are rendered with, beyond live-alerts.values.yaml. */
  values?: Record<string, Record<string, number>>;
  /** The first pod's environment and stdout: a FIFO the test can stop reading, /dev/null (under heavy load), or a pipe to the test. */
  env?: Record<string, string>;
  stdout?: 'fifo' | 'discard';
  /** The chart's synthetic probe: the blackbox exporter GETs /health on the serving pod's API port, as through the Service. */
  probe?: boolean;
  /** Liveness on PROBE_PORT, as the chart sets it. */
  livenessPort?: boolean;
}

/** `cause` and `end` may return the moment they acted, which the fire and resolve times count from. */
interface Scenario extends Setup {
  alerts: string[];
  slo?: string;
  did: string;
  ended: string;
  cause: (space: Namespace) => unknown;
  end: (space: Namespace) => unknown;
  /** Saturates a core: such scenarios take turns, two at once would starve every other process here. */
  heavy?: boolean;
  /** Alerts that may fire beside those measured, and that the shipped Alertmanager inhibit_rules hold back or that only warn. */
  alsoFires?: string[];
}

const rollout = (fault: Record<string, string>) => ({
  cause: (space: Namespace) => space.rollout(fault),
  end: (space: Namespace) => space.rollout({}),
  ended: 'Rolled out without the fault',
});

const SCENARIOS: Record<string, Scenario> = {
  down: {
    alerts: ['ProductServiceDown'],
    did: 'Killed the only pod (SIGKILL); kube-state-metrics: no available replica',
    ended: 'Pod started again',
    ksm: MEMORY_LIMIT,
    alsoFires: ['ProductServiceTargetDown'],
    // What kube-state-metrics reports once the pod's readiness probe fails; set first, so that no
    // scrape sees the pod gone while still available. The pod's TargetDown fires beside the outage's
    // page, and the shipped Alertmanager inhibit_rules hold it back.
    cause: (space) => {
      ksm.setAvailableReplicas(space.name, JOB, 0);
      return space.kill(space.serving);
    },
    end: async (space) => {
      await space.restart(space.serving);
      ksm.setAvailableReplicas(space.name, JOB, 1);
    },
  },
  scaledtozero: {
    alerts: ['ProductServiceDown'],
    did: 'Scaled to zero: the pod deleted, nothing left to scrape; no available replica',
    ended: 'A pod scheduled and scraped again',
    ksm: MEMORY_LIMIT,
    cause: async (space) => {
      space.unscrape(space.serving);
      ksm.setAvailableReplicas(space.name, JOB, 0);
      await space.dropped(space.serving);
      await space.kill(space.serving);
    },
    end: async (space) => {
      await space.start();
      ksm.setAvailableReplicas(space.name, JOB, 1);
    },
  },
  notscraped: {
    alerts: ['ProductServiceNotScraped'],
    did: 'Pod running, one available replica, removed from the scrape targets',
    ended: 'Scraped again',
    ksm: MEMORY_LIMIT,
    cause: (space) => space.unscrape(space.serving),
    end: (space) => space.scrape(space.serving),
  },
  targetdown: {
    alerts: ['ProductServiceTargetDown'],
    did: 'Killed one of two pods (SIGKILL)',
    ended: 'The pod left the scrape targets (deleted)',
    ksm: MEMORY_LIMIT,
    cause: async (space) => {
      const second = await space.start();
      await space.scrapedOnce(second);
      const killed = Date.now();
      await space.kill(second);
      return killed;
    },
    end: async (space) => {
      space.unscrape(space.serving);
      await space.dropped(space.serving);
    },
  },
  // No id is issued either: NoIdsIssued fires too, and the shipped Alertmanager inhibit_rules hold it back.
  errors: {
    alerts: BURN_RATES,
    slo: 'availability',
    alsoFires: ['ProductServiceNoIdsIssued'],
    did: 'Rolled out `FAULT_ERROR_RATIO=1` under 4 POST /product a second',
    traffic: 4,
    ...rollout({ FAULT_ERROR_RATIO: '1' }),
  },
  slow: {
    alerts: BURN_RATES,
    slo: 'latency',
    did: 'Rolled out `FAULT_DELAY=0.3` (the latency threshold is 0.25 s) under 4 POST /product a second',
    traffic: 4,
    ...rollout({ FAULT_DELAY: '0.3' }),
  },
  // ProductServiceQuietFailures pages first for failures answered 5xx: out of reach here, so that
  // NoIdsIssued is seen paging on its own.
  noids: {
    alerts: ['ProductServiceNoIdsIssued'],
    did: 'Rolled out `FAULT_ERROR_RATIO=1` under one POST /product every 2 s (below `minRequestRate`, 1/s here)',
    traffic: 0.5,
    values: { ProductServiceQuietFailures: { minFailures: 1000 } },
    ...rollout({ FAULT_ERROR_RATIO: '1' }),
  },
  // Ids are still issued: NoIdsIssued stays silent, and the burn rates are under their guard.
  quietfailures: {
    alerts: ['ProductServiceQuietFailures'],
    slo: 'availability',
    did: 'Rolled out `FAULT_ERROR_RATIO=0.5` under one POST /product every 2 s (below `minRequestRate`, 1/s here)',
    traffic: 0.5,
    ...rollout({ FAULT_ERROR_RATIO: '0.5' }),
  },
  // The prior window (20 s here) fills with traffic, then nothing arrives; the pod stays up.
  stopped: {
    alerts: ['ProductServiceTrafficStopped'],
    did: 'Stopped 4 POST /product a second after 25 s of them; the pod kept answering scrapes',
    ended: 'Traffic again',
    cause: async (space) => {
      const requests = traffic(4, () => space.serving);
      await sleep(25_000);
      await requests.stop();
      return Date.now();
    },
    end: (space) => space.serve(4),
  },
  restarts: {
    alerts: ['ProductServicePodRestarting'],
    did: 'Killed the pod (SIGKILL) and started it again, three times',
    ended: `No more restarts (the window is ${LIVE_RULES.alerts.ProductServicePodRestarting.window} here)`,
    cause: async (space) => {
      const started = Date.now();
      for (let i = 0; i < 3; i += 1) {
        // process_start_time_seconds has whole seconds: each start must be in a second of its own.
        await sleep(1100);
        await space.scrapedOnce(await space.restart(space.serving));
      }
      // changes() over the window counts the three starts only while the first pod's last sample is still in it.
      const took = (Date.now() - started) / 1000;
      expect(took, 'the three restarts outlast the rule window').toBeLessThan(seconds(LIVE_RULES.alerts.ProductServicePodRestarting.window));
    },
    end: () => undefined,
  },
  memory: {
    alerts: ['ProductServiceMemoryNearLimit'],
    did: 'Threshold 0.1; the limit kube-state-metrics reports lowered from 4 GiB to 384 MiB',
    ended: 'Limit raised to 4 GiB again',
    ksm: LARGE_MEMORY_LIMIT,
    values: { ProductServiceMemoryNearLimit: { threshold: 0.1 } },
    cause: (space) => ksm.addPod(space.name, space.serving.name, MEMORY_LIMIT),
    end: (space) => ksm.addPod(space.name, space.serving.name, LARGE_MEMORY_LIMIT),
  },
  heap: {
    alerts: ['ProductServiceHeapNearLimit'],
    did: `Threshold 0.05; rolled out the heap of a 384 MiB pod (\`${heapOf(MEMORY_LIMIT)}\`)`,
    ended: 'Rolled out the heap of a 4 GiB pod',
    values: { ProductServiceHeapNearLimit: { threshold: 0.05 } },
    env: { NODE_OPTIONS: heapOf(LARGE_MEMORY_LIMIT) },
    cause: (space) => space.rollout({ NODE_OPTIONS: heapOf(MEMORY_LIMIT) }),
    end: (space) => space.rollout({ NODE_OPTIONS: heapOf(LARGE_MEMORY_LIMIT) }),
  },
  // A trickle goes on after the load stops, as in production: the load's end is no traffic stop.
  saturated: {
    alerts: ['ProductServiceEventLoopSaturated'],
    did: 'autocannon, 32 connections of POST /product',
    ended: 'Load stopped',
    stdout: 'discard',
    traffic: 0.5,
    heavy: true,
    cause: (space) => space.load(32),
    end: (space) => space.stopLoads(),
  },
  logdrop: {
    alerts: ['ProductServiceLogLinesDropped'],
    did: 'stdout a FIFO nobody reads; load until its 8 MiB buffer is full, then 2 POST /product a second',
    ended: 'The reader reads again',
    stdout: 'fifo',
    traffic: 2,
    heavy: true,
    // The load that fills the buffer saturates the event loop while it runs.
    alsoFires: ['ProductServiceEventLoopSaturated'],
    cause: async (space) => {
      (space.serving.service as FifoService).pauseReader();
      // After the buffer is full, the steady traffic keeps writing lines that stdout cannot take.
      space.load(16);
      const dropped = async () => sampleValue(await scrape(space.serving.metricsUrl), 'product_service_log_lines_dropped_total');
      // Alone, the buffer fills in under 25 s; on one loaded CI run it took over a minute.
      await vi.waitFor(async () => expect(await dropped()).toBeGreaterThan(0), { timeout: 180_000, interval: 250 });
      await space.stopLoads();
    },
    end: (space) => (space.serving.service as FifoService).resumeReader(),
  },
  exportfail: {
    alerts: ['ProductServiceTelemetryExportFailing'],
    did: 'OTLP receiver answers 503 to every export, under 5 POST /product a second',
    ended: 'Receiver answers 200 again',
    collector: true,
    traffic: 5,
    cause: (space) => space.answering('error'),
    end: (space) => space.answering('ok'),
  },
  // Heavy: 400 requests a second on a core that the floods starve read as a saturated event loop.
  spansdrop: {
    alerts: ['ProductServiceSpansDropped'],
    did: 'OTLP receiver never answers, under 400 POST /product a second',
    ended: 'Receiver answers again',
    collector: true,
    traffic: 0.5,
    heavy: true,
    alsoFires: ['ProductServiceTelemetryExportFailing', 'ProductServiceEventLoopSaturated'],
    cause: (space) => {
      const hung = space.answering('hang');
      space.load(8, 400);
      return hung;
    },
    end: (space) => space.answering('ok'),
  },
  // The game day's outages that the pods' own metrics miss or see late (issue 34). The chart's
  // synthetic probe, a real blackbox exporter GETting /health on the API port, pages for each.
  // Overload: callers time out on connections the service reads late, and none is recorded as
  // failed or slow; the latency SLO may burn beside it (then it pages too). A trickle goes on after
  // it, as after saturated's load.
  flood: {
    alerts: ['ProductServiceProbeFailing'],
    did: `Flood: autocannon on the pod's one core, ${FLOOD_STEP} connections of POST /product more every 3 s (at most ${FLOOD_MAX}) until a new connection's GET /health went unanswered for the probe's ${PROBE_TIMEOUT_MS} ms four times in a row, a second apart; each caller giving up after 2 s`,
    ended: 'Load stopped',
    probe: true,
    stdout: 'discard',
    traffic: 0.5,
    heavy: true,
    alsoFires: ['ProductServiceEventLoopSaturated', 'ProductServiceLogLinesDropped', ...BURN_RATES],
    cause: (space) => space.flood(),
    end: (space) => space.stopLoads(),
  },
  // Both ports take connections and answer nothing: `up` goes to 0 too. After the thaw the event
  // loop catches up on what queued.
  freeze: {
    alerts: ['ProductServiceDown', 'ProductServiceProbeFailing'],
    did: 'Froze the only pod (SIGSTOP): both its ports take connections and answer nothing',
    ended: 'Thawed (SIGCONT)',
    probe: true,
    alsoFires: ['ProductServiceTargetDown', 'ProductServiceEventLoopSaturated'],
    cause: (space) => space.signal('SIGSTOP'),
    end: (space) => space.signal('SIGCONT'),
  },
  // Down for 5 s, answering for a second or two, again and again: ProductServiceDown needs `up` 0
  // for its whole `for` (15 s here), which only a slow start on a loaded machine gives it. Heavy:
  // every start costs Node's start-up on a busy core.
  crashloop: {
    alerts: ['ProductServiceProbeFailing'],
    did: 'Crash loop: killed the pod (SIGKILL), restarted it on its ports 5 s later, killed it again once it answered',
    ended: 'Restarted for good',
    probe: true,
    heavy: true,
    alsoFires: ['ProductServicePodRestarting', 'ProductServiceTargetDown', 'ProductServiceDown'],
    cause: (space) => space.crashLoop(5_000),
    end: (space) => space.stopLoads(),
  },
  // What a client can do: it fails readiness (and the probe), never liveness, which has a port of its own.
  fullport: {
    alerts: ['ProductServiceProbeFailing'],
    did: '`MAX_CONNECTIONS=50`, 60 connections held open on the API port: new ones closed at once; /metrics answered and liveness on `PROBE_PORT` said 200 all along',
    ended: 'The connections closed',
    probe: true,
    livenessPort: true,
    env: { MAX_CONNECTIONS: '50' },
    cause: (space) => space.holdConnections(60),
    end: (space) => space.stopLoads(),
  },
};
type Row = Pick<Scenario, 'slo' | 'did' | 'ended'> & { alert: string; fireSeconds: number; resolveSeconds: number; pages: number; also: string[] };
/** What Alertmanager's webhook receiver gets: one notification of one group (alertname, job, namespace, slo). */
interface Notification {
  receivedAt: number;
  groupKey: string;
  groupLabels: Record<string, string>;
  alerts: Array<{ status: 'firing' | 'resolved'; labels: Record<string, string> }>;
}
const notifications: Notification[] = [];
const NAMESPACES: Record<string, Setup> = { quiet: { ksm: MEMORY_LIMIT, collector: true, traffic: 2, probe: true }, ...SCENARIOS };

let dir = '';
let targetsDir = '';
let prometheus: Prometheus;
let ksm: KubeStateMetrics;
let watcher: AlertWatcher;
let devNull = -1;
/** Scenarios start once every namespace's healthy pod is scraped and no alert is pending or firing. */
let quietSince = Infinity;
const cleanups: Array<() => Promise<unknown>> = [];
const running: Array<{ stop(): Promise<void> }> = [];

class AlertWatcher {
  readonly sightings: Array<{ at: number; namespace: string; alert: string; state: ActiveAlert['state'] }> = [];
  private current: ActiveAlert[] = [];
  private stopped = false;
  private readonly loop = this.poll();

  private async poll(): Promise<void> {
    while (!this.stopped) {
      // Prometheus busy for a moment: the next poll will tell.
      this.current = await prometheus.alerts().catch(() => this.current);
      const at = Date.now();
      for (const { labels, state } of this.current) this.sightings.push({ at, namespace: labels.namespace ?? '', alert: labels.alertname ?? '', state });
      await sleep(250);
    }
  }

  async until(check: (alerts: ActiveAlert[]) => boolean, timeoutMs: number, what: string): Promise<number> {
    await vi.waitFor(
      () => {
        if (!check(this.current)) throw new Error(`waiting until ${what}; active alerts: ${JSON.stringify(this.current.map((a) => a.labels))}`);
      },
      { timeout: timeoutMs, interval: 100 },
    );
    return Date.now();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

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

/**
 * GET on a connection of its own, as a probe makes it (fetch would reuse a pooled one): the status,
 * 'refused' when the server closes it unanswered, or 'timeout' with no answer within `timeoutMs`.
 */
function statusOnNewConnection(url: string, timeoutMs?: number): Promise<number | 'refused' | 'timeout'> {
  return new Promise((resolve) => {
    const request = get(url, { agent: false, timeout: timeoutMs }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('timeout', () => {
      resolve('timeout');
      request.destroy();
    });
    request.on('error', () => resolve('refused'));
  });
}

let heavyTurn: Promise<unknown> = Promise.resolve();
async function oneHeavyAtATime<T>(run: () => Promise<T>): Promise<T> {
  const mine = heavyTurn.then(run, run);
  heavyTurn = mine.catch(() => undefined);
  return mine;
}

class Namespace {
  /** The pods Prometheus is told to scrape, by pod name (a restarted container keeps its pod's name). */
  private readonly scraped = new Map<string, Pod>();
  private readonly loads: Array<{ stop(): Promise<void> }> = [];
  serving!: Pod;
  collector: OtlpReceiver | undefined;
  /** The rules rendered for this namespace, whose windows bound the waits for its alerts. */
  rules: RuleFile = { groups: [] };

  constructor(readonly name: string) {}

  async start(env: Record<string, string> = {}, stdout?: Setup['stdout'], name = `${JOB}-${randomBytes(4).toString('hex')}-${randomBytes(3).toString('hex')}`) {
    const otel: Record<string, string> =
      this.collector === undefined ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: this.collector.url, OTEL_BSP_SCHEDULE_DELAY: '200' };
    const fullEnv = { OTEL_SERVICE_NAME: 'product-service', ...otel, ...env };
    const launch = (): Promise<ServiceProcess | FifoService> =>
      stdout === 'fifo' ? startWithFifoStdout(fullEnv) : startService(fullEnv, stdout === 'discard' ? devNull : undefined);
    // Free ports are picked before the service binds them: with many starting at once, another
    // process can take one first. A restart on the pod's own ports gets no second try.
    const service = await launch().catch((error: unknown) => {
      if (env.PORT !== undefined) throw error;
      return launch();
    });
    cleanups.push(() => ('close' in service ? service.close() : service.stop('SIGKILL')));
    const pod: Pod = {
      name,
      env,
      baseUrl: `http://127.0.0.1:${service.port}`,
      metricsUrl: `http://127.0.0.1:${service.metricsPort}/metrics`,
      livenessUrl: env.PROBE_PORT === undefined ? undefined : `http://127.0.0.1:${env.PROBE_PORT}/health`,
      service,
    };
    this.scrape(pod);
    this.serving = pod;
    return pod;
  }

  /** It stays a scrape target, as a crashed container does. */
  async kill(pod: Pod): Promise<void> {
    if ('close' in pod.service) await pod.service.close();
    else await pod.service.stop('SIGKILL');
  }

  /** On the same ports, as the kubelet restarts a container (after `downMs`, its back-off). */
  async restart(pod: Pod, downMs = 0): Promise<Pod> {
    await this.kill(pod);
    await sleep(downMs);
    return this.start({ ...pod.env, PORT: new URL(pod.baseUrl).port, METRICS_PORT: new URL(pod.metricsUrl).port }, undefined, pod.name);
  }

  /** SIGSTOP freezes the serving pod's process, SIGCONT thaws it. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    (this.serving.service as ServiceProcess).child.kill(signal);
  }

  /**
   * Restarts the serving pod `downMs` after each kill, and kills it again once it answers; stopLoads
   * ends it on a running pod. A start too slow for startService on a loaded machine is one more crash.
   */
  crashLoop(downMs: number): void {
    const loop = { stopped: false, done: Promise.resolve() };
    loop.done = (async () => {
      let up = true;
      while (!loop.stopped || !up) {
        up = await this.restart(this.serving, loop.stopped ? 0 : downMs).then(
          () => true,
          () => false,
        );
      }
    })();
    this.loads.push({
      async stop() {
        loop.stopped = true;
        await loop.done;
      },
    });
  }

  /**
   * `count` idle connections to the serving pod's API port, opened again when the server closes
   * one (past MAX_CONNECTIONS it closes them at once); then the API port refuses /health while
   * /metrics and liveness on PROBE_PORT answer.
   */
  async holdConnections(count: number): Promise<void> {
    const { port } = new URL(this.serving.baseUrl);
    const sockets = new Set<Socket>();
    let stopped = false;
    const open = (): void => {
      const socket = connect(Number(port), '127.0.0.1');
      sockets.add(socket);
      // Read, as any client does: unread, the 408 that cuts a held connection at headersTimeout keeps its close unseen and the attacker holds nothing.
      socket.resume();
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        if (!stopped) setTimeout(open, 500);
      });
    };
    for (let i = 0; i < count; i += 1) open();
    this.loads.push({
      async stop() {
        stopped = true;
        await Promise.all([...sockets].map((socket) => new Promise((resolve) => socket.once('close', resolve).destroy())));
      },
    });
    const pod = this.serving;
    await vi.waitFor(async () => expect(await statusOnNewConnection(`${pod.baseUrl}/health`)).toBe('refused'), { timeout: 10_000, interval: 250 });
    expect(await statusOnNewConnection(pod.livenessUrl ?? '')).toBe(200);
    expect(sampleValue(await scrape(pod.metricsUrl), 'product_service_http_requests_refused_total', { reason: 'connection_limit' })).toBeGreaterThan(0);
  }

  scrape(pod: Pod): void {
    this.scraped.set(pod.name, pod);
    this.writeTargets();
  }

  unscrape(pod: Pod): void {
    this.scraped.delete(pod.name);
    this.writeTargets();
  }

  private writeTargets(): void {
    const file = join(targetsDir, `${this.name}.json`);
    const targets = [...this.scraped.values()].map((pod) => ({ targets: [new URL(pod.metricsUrl).host], labels: { namespace: this.name, pod: pod.name } }));
    writeFileSync(`${file}.tmp`, JSON.stringify(targets));
    renameSync(`${file}.tmp`, file);
  }

  /** A pod stopped before it is dropped fails its scrapes; in a rollout the chart's SHUTDOWN_DELAY avoids that. */
  async dropped(pod: Pod): Promise<void> {
    await vi.waitFor(async () => expect((await prometheus.query(`up{job="${JOB}", namespace="${this.name}", pod="${pod.name}"}`)).data.result).toEqual([]), {
      ...PROMETHEUS_WAIT,
      message: `Prometheus still scrapes ${this.name}/${pod.name}`,
    });
  }

  /**
   * Requests over ProductServiceQuietFailures' window at minRequestRate or more, where the burn-rate
   * alerts judge: the rate of a series younger than the window reads low, and QuietFailures would page.
   */
  async aboveTrafficGuard(): Promise<void> {
    const rate = `avg_over_time(${REQUESTS_RECORD}{namespace="${this.name}"}[${LIVE_RULES.alerts.ProductServiceQuietFailures.window}])`;
    await vi.waitFor(async () => expect((await prometheus.query(`min(${rate}) >= ${LIVE_RULES.minRequestRate}`)).data.result).toHaveLength(1), {
      ...PROMETHEUS_WAIT,
      timeout: 60_000,
      message: `${this.name}: ${rate} stays under minRequestRate`,
    });
  }

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

  /** As the chart's Deployment rolls out: surge first, never below the desired count. */
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

  serve(perSecond: number): void {
    running.push(traffic(perSecond, () => this.serving));
  }

  /**
   * The serving pod on one core, as a pod whose CPU request is a core: a flood with its load
   * generator on that core (load's `oneCore`) saturates the pod without starving the rest of the suite.
   */
  pinToOneCore(): void {
    const pid = (this.serving.service as ServiceProcess).child.pid;
    const pinned = spawnSync('taskset', ['-a', '-p', '-c', ONE_CORE, String(pid)], { encoding: 'utf8' });
    if (pinned.status !== 0) throw new Error(`taskset: ${pinned.stderr}`);
  }

  /**
   * Overload as the game day's flood makes it, sized against the CPU the pod gets: the machine's other
   * work leaves it a varying share of its core, so connections are added until callers on new
   * connections wait past the probe's timeout (what the probe alert is meant to see), not a fixed count.
   */
  async flood(): Promise<void> {
    this.pinToOneCore();
    const health = `${this.serving.baseUrl}/health`;
    const unanswered = async (): Promise<boolean> => {
      const status = await statusOnNewConnection(health, PROBE_TIMEOUT_MS);
      await sleep(1000);
      return status === 'timeout';
    };
    for (let connections = FLOOD_STEP; ; connections += FLOOD_STEP) {
      this.load(FLOOD_STEP, undefined, 2, true);
      await sleep(3000);
      // Four probes a second apart, all unanswered: most probes of the alert's window will fail too.
      let failed = 0;
      while (failed < 4 && (await unanswered())) failed += 1;
      if (failed === 4) return;
      if (connections >= FLOOD_MAX) throw new Error(`${connections} connections on the pod's core leave /health answered within ${PROBE_TIMEOUT_MS} ms`);
    }
  }

  load(connections: number, rate?: number, timeoutSeconds?: number, oneCore = false): void {
    const args = [
      '-c',
      String(connections),
      ...(timeoutSeconds === undefined ? [] : ['-t', String(timeoutSeconds)]),
      '-d',
      '600',
      '-m',
      'POST',
      '-H',
      'content-type=application/json',
      '-b',
      '{}',
      ...(rate === undefined ? [] : ['-R', String(rate)]),
    ];
    const command = [process.execPath, join(ROOT, 'node_modules', 'autocannon', 'autocannon.js'), ...args, `${this.serving.baseUrl}/product`];
    const [bin = '', ...rest] = oneCore ? ['taskset', '-c', ONE_CORE, ...command] : command;
    const child = spawn(bin, rest, { stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.loads.push({
      async stop() {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await exited;
      },
    });
  }

  async stopLoads(): Promise<void> {
    await Promise.all(this.loads.splice(0).map((load) => load.stop()));
  }

  answering(mode: ReceiverMode): number {
    (this.collector as OtlpReceiver).mode = mode;
    return Date.now();
  }

  async fired(alert: string, since: number, slo?: string): Promise<number> {
    const at = await watcher.until(
      (active) => active.some((a) => this.matches(a, alert, slo) && a.state === 'firing'),
      patience(this.rule(alert), false),
      `${alert} fires in ${this.name}`,
    );
    return (at - since) / 1000;
  }

  async resolved(alert: string, since: number, slo?: string): Promise<number> {
    const at = await watcher.until(
      (active) => !active.some((a) => this.matches(a, alert, slo)),
      patience(this.rule(alert), true),
      `${alert} resolves in ${this.name}`,
    );
    return (at - since) / 1000;
  }

  private rule(alert: string): Rule | undefined {
    return alertsOf(this.rules).find((rule) => rule.alert === alert);
  }

  private matches(active: ActiveAlert, alert: string, slo: string | undefined): boolean {
    return active.labels.namespace === this.name && active.labels.alertname === alert && (slo === undefined || active.labels.slo === slo);
  }

  /** Groups that notified of a firing critical alert of this namespace: the pages on call got, after the shipped inhibit_rules. */
  pages(): number {
    const paging = notifications.filter(
      (n) =>
        n.groupLabels.namespace === this.name && n.receivedAt >= quietSince && n.alerts.some((a) => a.status === 'firing' && a.labels.severity === 'critical'),
    );
    return new Set(paging.map((n) => n.groupKey)).size;
  }

  firedHere(): string[] {
    const names = watcher.sightings.filter((s) => s.namespace === this.name && s.state === 'firing' && s.at >= quietSince).map((s) => s.alert);
    return [...new Set(names)].sort();
  }
}

describe('every alert the chart renders, fired by the real service', () => {
  const suiteStarted = Date.now();
  const rows: Row[] = [];
  const ns = new Map(Object.keys(NAMESPACES).map((name) => [name, new Namespace(name)]));
  const space = (name: string): Namespace => ns.get(name) as Namespace;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'live-alerts-'));
    targetsDir = join(dir, 'targets');
    mkdirSync(targetsDir);
    devNull = openSync('/dev/null', 'w');
    ksm = await startKubeStateMetrics();
    cleanups.push(() => ksm.close());

    // The rules first: helm runs synchronously, and would stall the start of the services meanwhile.
    const ruleFiles = Object.entries(NAMESPACES).map(([name, setup]) => {
      // A values file rather than --set, which passes decimals as strings.
      const values = join(dir, `values-${name}.yaml`);
      writeFileSync(values, stringify({ monitoring: { prometheusRule: { alerts: setup.values ?? {} } } }));
      const rules = join(dir, `rules-${name}.yaml`);
      const probe = setup.probe === true ? [PROBE_RULE_VALUES] : [];
      const text = renderRules({ release: RELEASE, namespace: name, values: [VALUES_FILE, ...probe, values] });
      writeFileSync(rules, text);
      space(name).rules = parseRules(text);
      return rules;
    });
    // Before Prometheus starts, so each pod is scraped from its first evaluation on.
    // Three at a time: more services starting at once on two busy cores miss their start timeout.
    // allSettled: a start that fails must not leave the others running unrecorded for afterAll.
    const namespaces = Object.entries(NAMESPACES);
    for (let i = 0; i < namespaces.length; i += 3) {
      const settled = await Promise.allSettled(
        namespaces.slice(i, i + 3).map(async ([name, setup]) => {
          if (setup.collector === true) {
            const collector = await startOtlpReceiver('ok');
            cleanups.push(() => collector.close());
            space(name).collector = collector;
          }
          const env = setup.livenessPort === true ? { ...setup.env, PROBE_PORT: String(await freePort()) } : setup.env;
          const pod = await space(name)
            .start(env, setup.stdout)
            .catch((error: unknown) => {
              throw new Error(`${name}: ${String(error)}`);
            });
          if (setup.ksm !== undefined) {
            ksm.setAvailableReplicas(name, JOB, 1);
            ksm.addPod(name, pod.name, setup.ksm);
          }
        }),
      );
      const failed = settled.find((result) => result.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
    }

    // One exporter probes every namespace that has the probe on, as one serves a cluster; the
    // Probe's 30 s interval and 2 s timeout become 1 s (the exporter waits 0.5 s less).
    const probed = Object.entries(NAMESPACES).filter(([, setup]) => setup.probe === true);
    const blackbox = await startBlackboxExporter(dir, renderProbe(RELEASE, 'quiet').spec.module ?? '');
    cleanups.push(() => blackbox.stop());
    // The shipped Alertmanager configuration, its receiver a webhook here, its group timings (30 s
    // wait, 5 m interval by default) shortened as the rules' windows are.
    const webhook = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        notifications.push({ ...(JSON.parse(body) as Notification), receivedAt: Date.now() });
        res.end();
      });
    });
    webhook.listen(0, '127.0.0.1');
    await once(webhook, 'listening');
    cleanups.push(async () => {
      webhook.closeAllConnections();
      await new Promise((resolve) => webhook.close(resolve));
    });
    const shipped = parse(readFileSync(ALERTMANAGER_CONFIG, 'utf8')) as { route: object; receivers: object[] };
    const amDir = join(dir, 'alertmanager');
    mkdirSync(amDir);
    writeFileSync(
      join(amDir, 'alertmanager.yml'),
      stringify({
        ...shipped,
        route: { ...shipped.route, group_wait: '1s', group_interval: '5s', repeat_interval: '1h' },
        receivers: shipped.receivers.map((receiver) => ({
          ...receiver,
          webhook_configs: [{ url: `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/` }],
        })),
      }),
    );
    const alertmanager = await startAlertmanager(amDir, join(amDir, 'alertmanager.yml'));
    cleanups.push(() => alertmanager.stop());

    const probeJobs = probed.map(([name]) => probeScrapeConfig(renderProbe(RELEASE, name), blackbox.address, [`${space(name).serving.baseUrl}/health`], '1s'));

    prometheus = await startPrometheus(dir, {
      rule_files: ruleFiles,
      alerting: { alertmanagers: [{ static_configs: [{ targets: [alertmanager.address] }] }] },
      scrape_configs: [
        // The job the chart's ServiceMonitor produces: the release's full name.
        { job_name: JOB, file_sd_configs: [{ files: [join(targetsDir, '*.json')], refresh_interval: '1s' }] },
        // kube-state-metrics' own labels (namespace, pod) are kept, as kube-prometheus-stack does.
        { job_name: 'kube-state-metrics', honor_labels: true, static_configs: [{ targets: [ksm.target] }] },
        ...probeJobs,
      ],
    });
    cleanups.push(() => prometheus.stop());
    watcher = new AlertWatcher();
    cleanups.push(() => watcher.stop());

    await Promise.all([...ns.values()].map((each) => each.scrapedOnce(each.serving)));
    for (const [name, setup] of Object.entries(NAMESPACES)) if (setup.traffic !== undefined) space(name).serve(setup.traffic);
    // Before its first scrape a namespace has no `up` series: ProductServiceDown is pending for a
    // moment, and must be gone before the scenarios begin.
    quietSince = await watcher.until((active) => active.length === 0, 30_000, 'no alert is pending or firing after every pod was scraped');
  });

  afterAll(async () => {
    await Promise.allSettled(running.map((requests) => requests.stop()));
    await Promise.allSettled(cleanups.map((cleanup) => cleanup()));
    if (devNull >= 0) closeSync(devNull);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it.concurrent.each(Object.entries(SCENARIOS).map(([name, s]) => [`${s.alerts.join(', ')}${s.slo === undefined ? '' : ` (${s.slo})`}: ${s.did}`, name]))(
    '%s',
    async (_title, name) => {
      const scenario = SCENARIOS[name] as Scenario;
      const here = space(name);
      const act = async (step: (space: Namespace) => unknown): Promise<number> => {
        const called = Date.now();
        const acted = await step(here);
        return typeof acted === 'number' ? acted : called;
      };
      const cycle = async (): Promise<void> => {
        try {
          if (scenario.slo !== undefined && (scenario.traffic ?? 0) >= LIVE_RULES.minRequestRate) await here.aboveTrafficGuard();
          const t0 = await act(scenario.cause);
          const fired = await Promise.all(scenario.alerts.map((alert) => here.fired(alert, t0, scenario.slo)));
          const t1 = await act(scenario.end);
          const resolved = await Promise.all(scenario.alerts.map((alert) => here.resolved(alert, t1, scenario.slo)));
          const { slo, did, ended } = scenario;
          const also = here.firedHere().filter((alert) => !scenario.alerts.includes(alert));
          const pages = here.pages();
          scenario.alerts.forEach((alert, i) =>
            rows.push({ alert, slo, did, ended, fireSeconds: fired[i] ?? NaN, resolveSeconds: resolved[i] ?? NaN, pages, also }),
          );
        } finally {
          await here.stopLoads();
        }
      };
      await (scenario.heavy === true ? oneHeavyAtATime(cycle) : cycle());
      expect(here.firedHere().filter((alert) => !(scenario.alsoFires ?? []).includes(alert))).toEqual([...scenario.alerts].sort());
    },
    // Each scenario's own waits are bounded by its rules (patience); a heavy one may first wait for
    // every other heavy one's turn, 5 minutes each at most.
    Object.values(SCENARIOS).filter((scenario) => scenario.heavy === true).length * 300_000,
  );

  it('with no fault, nothing was pending or firing, all through the suite', () => {
    expect(watcher.sightings.filter((s) => s.namespace === 'quiet' && s.at >= quietSince)).toEqual([]);
  });

  it('every alert the chart renders fired and resolved', () => {
    const seconds = (value: number): string => String(Math.max(0, Math.round(value)));
    const order = (row: Row): number => ALERTS.indexOf(row.alert);
    const sorted = [...rows].sort((a, b) => order(a) - order(b) || (a.slo ?? '').localeCompare(b.slo ?? '') || a.did.localeCompare(b.did));
    const table = [
      '| Alert | What the suite did | How it ended | Fired after (s) | Resolved after (s) | Pages | Also fired |',
      '| ----- | ------------------ | ------------ | --------------: | -----------------: | ----: | ---------- |',
      ...sorted.map(
        (row) =>
          `| ${row.alert}${row.slo === undefined ? '' : ` (${row.slo})`} | ${row.did} | ${row.ended} | ${seconds(row.fireSeconds)} | ${seconds(row.resolveSeconds)} | ${row.pages} | ${row.also.map((alert) => alert.replace(/^ProductService/, '')).join(', ')} |`,
      ),
    ].join('\n');
    const suiteSeconds = Math.round((Date.now() - suiteStarted) / 1000);
    const md = `${table}\n\nRules rendered with \`test/deploy/live-alerts.values.yaml\`; scrapes and evaluations every second. The suite took ${suiteSeconds} s.`;
    // Printed first: the rows of the scenarios that passed help when another did not.
    console.log(md);
    expect([...new Set(sorted.map((row) => row.alert))]).toEqual(ALERTS);
    if (process.env.LIVE_ALERTS_WRITE === '1') writeBlock(RUNBOOK, TABLE, md);
  });
});

describe("the runbook's table of alerts seen firing", () => {
  it('names every alert, the probe alert included, each with the seconds it took to fire and to resolve and the pages it sent', () => {
    const rows = readBlock(RUNBOOK, TABLE)
      .split('\n')
      .filter((line) => line.startsWith('| ProductService'))
      .map((line) => line.split('|').map((cell) => cell.trim()));
    const named = [...new Set(rows.map((cells) => (cells[1] ?? '').replace(/ \(.*\)$/, '')))];
    expect(named).toEqual(ALERTS);
    for (const cells of rows)
      expect(cells.slice(4, 7), cells[1]).toEqual([expect.stringMatching(/^\d+$/), expect.stringMatching(/^\d+$/), expect.stringMatching(/^\d+$/)]);
  });
});
