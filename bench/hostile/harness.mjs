// The hostile run's harness: the service processes it attacks (each class gets its own), /health
// probes, load workers in their own processes, and the runner that turns one class into table rows.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BENCH, NODE, RESULTS, SERVICE, max, request, runJson, startServer } from '../lib.mjs';

/** Service logs and the results of a partial run (gitignored, as every bench/results/*.tmp). */
export const WORK = path.join(RESULTS, 'hostile.tmp');
/** Our own snapshot directory (lib.mjs snapshotService), so that a concurrent `npm run bench` cannot remove it under us. */
export const SNAPSHOT = 'hostile-app.tmp';
const WORKERS = path.join(BENCH, 'hostile/workers.mjs');
export const MB = 1024 * 1024;

/**
 * The chart's NODE_OPTIONS as they act in its pod: `--max-old-space-size-percentage=60` of the
 * 384 Mi memory limit, and 16 MiB semi-spaces. The harness puts the service in no memory cgroup,
 * where the percentage would apply to the host's memory, so the pod's heap is written out.
 */
export const POD_HEAP = '--max-old-space-size=230 --max-semi-space-size=16';

async function startService(serviceDir, name, env = {}) {
  const stdout = path.join(WORK, `${name}.stdout`);
  const svc = await startServer(
    name,
    { args: SERVICE, cwd: serviceDir, env: { NODE_OPTIONS: POD_HEAP, ...env } },
    { logs: WORK, stdout, everyMs: 5, sampleRss: true },
  );
  const lines = (file) =>
    fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
  return Object.assign(svc, {
    name,
    logLines: () =>
      lines(stdout).map((l) => {
        try {
          return JSON.parse(l);
        } catch {
          return { raw: l };
        }
      }),
    metrics: async () => (await request(svc.metricsPort, 'GET', '/metrics', undefined, 5000)).body,
  });
}

const percentile = (values, q) => {
  const v = [...values].sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.floor(q * v.length))] : NaN;
};

/**
 * GET /health every `everyMs` on a new connection each time (as the kubelet probes), each given
 * 2 s (the chart's readiness probe timeout); stop() resolves the latencies and the failures
 * (error, timeout or not 200).
 */
export function startHealthProbe(port, everyMs = 100) {
  const latencies = [];
  let failures = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      try {
        const res = await request(port, 'GET', '/health', undefined, 2000);
        if (res.status === 200) latencies.push(performance.now() - t0);
        else failures++;
      } catch {
        failures++;
      }
      await sleep(everyMs);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { probes: latencies.length + failures, failures, p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), maxMs: max(latencies) };
    },
  };
}

export const health = (h) => `/health ${h.probes - h.failures}/${h.probes} ok, p50 ${ms(h.p50Ms)}, p99 ${ms(h.p99Ms)}, max ${ms(h.maxMs)}`;
const ms = (x) => (Number.isFinite(x) ? `${x < 10 ? x.toFixed(1) : Math.round(x)} ms` : '–');

export const runWorker = (kind, options) => runJson('HOSTILE_WORKER', NODE, [WORKERS, kind, JSON.stringify(options)]);

export const tally = (xs) => xs.reduce((acc, x) => ({ ...acc, [x]: (acc[x] ?? 0) + 1 }), {});

/** "166020× 201, 9× ECONNRESET": counts as a table cell. */
export const countsText = (counts) =>
  Object.entries(counts)
    .map(([k, v]) => `${v}× ${k}`)
    .join(', ');

export const statusText = (load) => countsText({ ...load.statuses, ...load.errors }) || 'nothing';

/** A class that throws or hangs is one FAILED row, and the run goes on. */
export async function runClass(title, fn, serviceDir) {
  const services = [];
  const cleanups = [];
  const ctx = {
    start: async (name, env, options) => {
      const svc = await startService(serviceDir, name, env, options);
      services.push(svc);
      return svc;
    },
    onCleanup: (f) => cleanups.push(f),
  };
  const t0 = performance.now();
  let rows;
  try {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('class did not finish within 120 s')), 120_000);
    });
    rows = await Promise.race([fn(ctx), timeout]).finally(() => clearTimeout(timer));
  } catch (err) {
    rows = [{ sent: '–', got: `harness error: ${err.message.split('\n')[0]}`, failures: [err.message.split('\n')[0]] }];
  } finally {
    await Promise.all(services.map((svc) => svc.stop('SIGKILL')));
    for (const f of cleanups) {
      try {
        await f();
      } catch {
        /* best effort */
      }
    }
  }
  const peak = max(services.map((svc) => svc.peakRssMb()));
  const seconds = (performance.now() - t0) / 1000;
  return rows.map((row) => ({ class: title, ...row, rssMb: row.rssMb ?? peak, ok: row.failures.length === 0, seconds }));
}
