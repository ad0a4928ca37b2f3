// The hostile run's harness: the service processes it attacks (each class gets its own), /health
// probes, load workers in their own processes, and the runner that turns one class into table rows.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BENCH, LOAD_CORE, NODE, RESULTS, ROOT, SERVER_CORE, cleanEnv, freePorts, max, pinned, request, rssMb, snapshotService, waitHealthy } from '../lib.mjs';

/** Service logs, the FIFO of class 7 and the results of a partial run (gitignored, as every bench/results/*.tmp). */
export const WORK = path.join(RESULTS, 'hostile.tmp');
/** Our own snapshot directory, so that a concurrent `npm run bench` cannot remove it under us. */
const SNAPSHOT = 'hostile-app.tmp';
const WORKERS = path.join(BENCH, 'hostile/workers.mjs');
export const MB = 1024 * 1024;

/**
 * Copies dist/ and package.json (snapshotService) and checks that dist/ did not change while it
 * was copied: a rebuild that started at that moment would leave a mix of two builds.
 */
export function takeSnapshot() {
  const listing = () =>
    fs
      .readdirSync(path.join(ROOT, 'dist'))
      .map((name) => {
        const s = fs.statSync(path.join(ROOT, 'dist', name));
        return `${name}:${s.size}:${s.mtimeMs}`;
      })
      .join('\n');
  for (let attempt = 1; ; attempt++) {
    const before = listing();
    const dir = snapshotService(SNAPSHOT);
    if (listing() === before && fs.existsSync(path.join(dir, 'dist/main.js'))) return dir;
    if (attempt === 5) throw new Error('dist/ kept changing while it was copied (a rebuild running?)');
    execSleep(2000);
  }
}

function execSleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The chart's NODE_OPTIONS as they act in its pod: `--max-old-space-size-percentage=60` of the
 * 384 Mi memory limit, and 16 MiB semi-spaces. The harness puts the service in no memory cgroup,
 * where the percentage would apply to the host's memory, so the pod's heap is written out.
 */
export const POD_HEAP = '--max-old-space-size=230 --max-semi-space-size=16';

/**
 * Starts the snapshot with the production command line on free ports, pinned to core 0, stdout to
 * a file (or `stdoutFd`: class 7's FIFO), stderr to a file, and samples its VmRSS every 100 ms
 * until it exits. Resolves once /health answers 200; with `allowExit` also when it exits first
 * (configuration errors).
 */
async function startService(serviceDir, name, env = {}, { stdoutFd, allowExit = false } = {}) {
  const [port, metricsPort] = await freePorts(2);
  fs.mkdirSync(WORK, { recursive: true });
  const stdoutPath = path.join(WORK, `${name}.stdout`);
  const stderrPath = path.join(WORK, `${name}.stderr`);
  const stdout = stdoutFd ?? fs.openSync(stdoutPath, 'w');
  const stderr = fs.openSync(stderrPath, 'w');
  const [cmd, argv] = pinned(SERVER_CORE, NODE, ['dist/main.js']);
  const fullEnv = { ...cleanEnv(), NODE_OPTIONS: POD_HEAP, HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort), ...env };
  const t0 = performance.now();
  const child = spawn(cmd, argv, { cwd: serviceDir, env: fullEnv, stdio: ['ignore', stdout, stderr] });
  if (stdoutFd === undefined) fs.closeSync(stdout);
  fs.closeSync(stderr);

  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(child.pid) || 0);
  }, 100);
  let exited = null;
  const exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      clearInterval(sampler);
      exited = { code, signal, atMs: performance.now() };
      resolve(exited);
    }),
  );

  const svc = {
    name,
    child,
    pid: child.pid,
    port,
    metricsPort,
    stdoutPath,
    stderrPath,
    exit,
    startupMs: NaN,
    exited: () => exited,
    peakRssMb: () => (peak > 0 ? peak : NaN),
    stderrLines: () =>
      fs
        .readFileSync(stderrPath, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== ''),
    /** stdout lines parsed as JSON (non-JSON lines as {raw}). */
    logLines: () =>
      fs
        .readFileSync(stdoutPath, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          try {
            return JSON.parse(l);
          } catch {
            return { raw: l };
          }
        }),
    metrics: async () => (await request(metricsPort, 'GET', '/metrics', undefined, 5000)).body,
    /** Sends `signal` and resolves {code, signal, ms} (ms from the signal to the exit); SIGKILL after `killAfterMs`. */
    async stop(signal = 'SIGTERM', killAfterMs = 30_000) {
      if (exited) return { ...exited, ms: 0 };
      const sentAt = performance.now();
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      const result = await exit;
      clearTimeout(timer);
      return { code: result.code, signal: result.signal, ms: result.atMs - sentAt };
    },
  };

  if (!(await waitHealthy(name, port, svc.exited, 5))) {
    if (allowExit) return svc;
    throw new Error(`${name} exited during start-up (${JSON.stringify(exited)}): ${svc.stderrLines().join(' / ').slice(0, 500)}`);
  }
  svc.startupMs = performance.now() - t0;
  return svc;
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

/**
 * Runs a load worker (workers.mjs) pinned to core 1, so that generating load
 * does not slow down this harness's probes and samplers; resolves the JSON it prints.
 */
export function runWorker(kind, options) {
  const [cmd, argv] = pinned(LOAD_CORE, NODE, [WORKERS, kind, JSON.stringify(options)]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('HOSTILE_WORKER '));
      if (code === 0 && line) resolve(JSON.parse(line.slice('HOSTILE_WORKER '.length)));
      else reject(new Error(`worker ${kind} exited ${code}: ${out.slice(-500)}`));
    });
  });
}

/** The value of one Prometheus series summed over the label sets that match `labels` (regexps). */
export function metricSum(text, name, labels = {}) {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/);
    if (!m || m[1] !== name) continue;
    const set = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, re]) => re.test(set[k] ?? ''))) sum += Number(m[3]);
  }
  return sum;
}

/** How often each value occurs: {value: count}. */
export const tally = (xs) => xs.reduce((acc, x) => ({ ...acc, [x]: (acc[x] ?? 0) + 1 }), {});

/** "166020× 201, 9× ECONNRESET on a new connection": a worker's answers and errors by kind. */
export const statusText = (load) =>
  Object.entries({ ...load.statuses, ...load.errors })
    .map(([k, v]) => `${v}× ${k}`)
    .join(', ') || 'nothing';

/** Runs one class with its own services; a class that throws or hangs is one FAILED row, and the run goes on. */
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
