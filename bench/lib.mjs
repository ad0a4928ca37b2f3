// Shared parts of the benchmark: the repository's paths, the configurations, /proc readers, the
// OTLP sink and server processes, the load generators. Used by every bench/*.mjs script.
import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SERVICE_NODE_ARGS, SERVICE_NODE_OPTIONS } from './process-flags.mjs';

export const ROOT = path.resolve(import.meta.dirname, '..');
const BENCH = path.join(ROOT, 'bench');
export const RESULTS = path.join(BENCH, 'results');
const NODE = process.execPath;

const SERVICE = ['dist/main.js'];

export { SERVICE_NODE_ARGS } from './process-flags.mjs';

/**
 * A copy of the build, so that a rebuild during a long run cannot mix two builds in one set of
 * numbers; `require` still finds the repository's node_modules by walking up.
 */
export function snapshotService(name = 'app.tmp', from = ROOT) {
  if (!fs.existsSync(path.join(from, 'dist/main.js'))) throw new Error(`${path.join(from, 'dist/main.js')} is missing: run npm run build`);
  const listing = () =>
    fs
      .readdirSync(path.join(from, 'dist'), { recursive: true })
      .map((f) => `${f}:${fs.statSync(path.join(from, 'dist', f)).mtimeMs}`)
      .join();
  const dir = path.join(RESULTS, name);
  for (let attempt = 1; attempt <= 5; attempt++) {
    const before = listing();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    fs.cpSync(path.join(from, 'dist'), path.join(dir, 'dist'), { recursive: true });
    fs.copyFileSync(path.join(from, 'package.json'), path.join(dir, 'package.json'));
    if (listing() === before) return dir;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2000);
  }
  throw new Error('dist/ kept changing while it was copied (a rebuild running?)');
}

export const AGAINST = '@against';

/**
 * Every configuration by name. With `againstDir` (a copy of another build), also
 * `service-off@against` and `service-full@against`: the same two configurations run from there.
 * @param {number} sinkPort
 * @param {string} [serviceDir] @param {string} [againstDir]
 * @returns {Record<string, {title: string, args: string[], cwd?: string, env: Record<string, string>, traced: boolean, scrapeSdk?: boolean, nodeArgs?: string[]}>}
 */
export function configurations(sinkPort, serviceDir = ROOT, againstDir = undefined) {
  const fullObservability = {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_TRACES_SAMPLER: 'always_on',
    LOG_LEVEL: 'info',
  };
  const imageNodeOptions = { NODE_OPTIONS: SERVICE_NODE_OPTIONS };
  const service = {
    'service-off': {
      title: 'product-service, observability off',
      args: SERVICE,
      nodeArgs: SERVICE_NODE_ARGS,
      cwd: serviceDir,
      env: { ...imageNodeOptions, OTEL_SDK_DISABLED: 'true', LOG_LEVEL: 'silent' },
      traced: false,
    },
    'service-full': {
      title: 'product-service, full observability',
      args: SERVICE,
      nodeArgs: SERVICE_NODE_ARGS,
      cwd: serviceDir,
      env: { ...imageNodeOptions, ...fullObservability },
      traced: true,
      scrapeSdk: true,
    },
  };
  const against =
    againstDir === undefined
      ? {}
      : Object.fromEntries(
          Object.entries(service).map(([name, config]) => [
            `${name}${AGAINST}`,
            { ...config, title: `${config.title}, the build under comparison (--against)`, cwd: againstDir },
          ]),
        );
  return {
    'plain-http': {
      title: 'plain node:http (baseline)',
      args: ['bench/baseline-http.cjs'],
      env: {},
      traced: false,
    },
    ...service,
    straightforward: {
      title: 'straightforward Koa + sdk-node + auto-instrumentations',
      args: ['--require', './bench/straightforward/tracing.cjs', 'bench/straightforward/server.cjs'],
      env: fullObservability,
      traced: true,
    },
    ...against,
  };
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
const CORES = os.availableParallelism();
export const PIN = CORES >= 2;
export const SERVER_CORE = '0';
export const LOAD_CORE = '1';

export function pinToLoadCore() {
  if (PIN) execFileSync('taskset', ['-a', '-p', '-c', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
}

/** @param {string} core @param {string} cmd @param {string[]} argv */
function pinned(core, cmd, argv) {
  return PIN ? ['taskset', ['-c', core, cmd, ...argv]] : [cmd, argv];
}

/** utime and stime (user and kernel CPU) of the whole process (all threads) in microseconds. */
export function cpuSplit(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after "(comm)": state is field 3, utime 14, stime 15 (1-based, proc(5)).
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(rest[11]) * 1e6) / CLK_TCK, sys: (Number(rest[12]) * 1e6) / CLK_TCK };
}

export const cpuMicros = (pid) => Object.values(cpuSplit(pid)).reduce((a, b) => a + b);

/**
 * Scheduler times of a server process from schedstat (Documentation/scheduler/sched-stats.rst), in
 * ns: how long its main thread (the event loop) waited runnable for a CPU, and how long its other
 * threads (GC helpers, libuv's pool, the exporter's I/O) ran. The server is pinned to one core, so
 * the wait minus the other threads' run time is at least what other processes made it wait.
 */
export function schedTimes(pid) {
  const fields = (tid) => fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
  let othersRunNs = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      if (tid !== String(pid)) othersRunNs += fields(tid)[0];
    } catch {
      /* a thread that ended */
    }
  }
  return { mainWaitNs: fields(pid)[1], othersRunNs };
}

/** Microseconds in which some runnable task of the machine waited for a CPU (PSI, `some ... total=`); NaN without PSI. */
export function cpuPressureUs() {
  try {
    return Number(/^some .*total=(\d+)/m.exec(fs.readFileSync('/proc/pressure/cpu', 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** Resident set size in MB (VmRSS), or NaN once the process is gone. */
export function rssMb(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** `n` distinct free ports: all are held open together, so the kernel cannot hand one out twice. */
export async function freePorts(n) {
  const servers = Array.from({ length: n }, () => net.createServer().listen(0, '127.0.0.1'));
  await Promise.all(servers.map((server) => once(server, 'listening')));
  const ports = servers.map((server) => /** @type {net.AddressInfo} */ (server.address()).port);
  await Promise.all(servers.map((server) => once(server.close(), 'close')));
  return ports;
}

export function request(port, method, urlPath, body, timeout = 2000, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        agent: false,
        timeout,
        headers: body ? { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : headers,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode, body: text, headers: res.headers }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** What makes a run's numbers untrustworthy: reported at once, and the run exits 1 at its end (endRun). */
export const problems = [];
export function note(msg) {
  problems.push(msg);
  console.error(`PROBLEM: ${msg}`);
}
export function endRun() {
  if (problems.length === 0) return;
  console.error(`${problems.length} problem(s); the numbers above may not mean what they say.`);
  process.exitCode = 1;
}

export const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};
export const min = (xs) => Math.min(...xs.filter(Number.isFinite));
export const max = (xs) => Math.max(...xs.filter(Number.isFinite));

export async function startSink() {
  const [cmd, argv] = pinned(LOAD_CORE, NODE, [path.join(BENCH, 'otlp-sink.mjs')]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(String(d)));
    child.once('exit', (code) => reject(new Error(`otlp-sink exited with ${code}`)));
  });
  const { port } = JSON.parse(line);
  return {
    port,
    stats: async () => JSON.parse((await request(port, 'GET', '/stats')).body),
    reset: () => request(port, 'POST', '/reset'),
    stop: () => child.kill('SIGTERM'),
  };
}

export const logDir = path.join(RESULTS, 'logs.tmp');

/**
 * The start-up time includes the exec of `taskset`. stdout goes to /dev/null, not a pipe this
 * harness would have to drain (back-pressure and our own CPU in the measurement).
 */
export async function startServer(name, config) {
  const [port, metricsPort] = await freePorts(2);
  const env = { ...cleanEnv(), HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort), ...config.env };
  fs.mkdirSync(logDir, { recursive: true });
  const stderrPath = path.join(logDir, `${name}.stderr`);
  const stderrFd = fs.openSync(stderrPath, 'w');
  const [cmd, argv] = pinned(SERVER_CORE, NODE, [...(config.nodeArgs ?? []), ...config.args]);
  const t0 = performance.now();
  const child = spawn(cmd, argv, { cwd: config.cwd ?? ROOT, env, stdio: ['ignore', 'ignore', stderrFd] });
  fs.closeSync(stderrFd);
  let exited = null;
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve((exited = { code, signal }))));
  const server = {
    pid: child.pid,
    port,
    metricsPort,
    startupMs: NaN,
    stderrPath,
    /** SIGTERM, and resolves {code, signal}; SIGKILL after 30 s. */
    async stop() {
      if (exited) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exit;
      clearTimeout(timer);
      return exited;
    },
  };
  if (await waitHealthy(name, port, () => exited, 2)) server.startupMs = performance.now() - t0;
  else throw new Error(`${name} exited during start-up (${JSON.stringify(exited)}):\n${fs.readFileSync(stderrPath, 'utf8').slice(-2000)}`);
  return server;
}

export async function waitHealthy(name, port, exited, everyMs) {
  const t0 = performance.now();
  for (;;) {
    if (exited()) return false;
    if (performance.now() - t0 > 30_000) throw new Error(`${name} did not answer /health within 30 s`);
    try {
      if ((await request(port, 'GET', '/health', undefined, 1000)).status === 200) return true;
    } catch {
      /* not listening yet */
    }
    await sleep(everyMs);
  }
}

/** The harness's own environment minus anything that would change the servers' behaviour. */
function cleanEnv() {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith('OTEL_') || key === 'NODE_OPTIONS' || key === 'LOG_LEVEL') delete env[key];
  }
  return env;
}

export function run(cmd, argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${argv.join(' ')} exited ${code}: ${err || out}`))));
  });
}

/** Runs a load generator on the load core and parses the line of its output that starts with `prefix`. */
async function runJson(prefix, cmd, argv) {
  const out = await run(...pinned(LOAD_CORE, cmd, argv));
  const line = out.split('\n').find((l) => l.startsWith(`${prefix} `));
  if (!line) throw new Error(`${cmd} printed no ${prefix} summary:\n${out}`);
  return JSON.parse(line.slice(prefix.length + 1));
}

/**
 * Closed-loop load with wrk (bench/install-tools.sh): each connection sends its next request when
 * the previous answer arrives, for the maximum throughput and the CPU per request at saturation.
 * @returns {Promise<{requests: number, rps: number, p50Ms: number, p99Ms: number, errors: number}>}
 */
export async function closedLoad(port, seconds, connections) {
  const wrk = ['-t1', `-c${connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--timeout', '5s', '-s', path.join(BENCH, 'post.lua')];
  const r = await runJson('WRK_JSON', 'wrk', [...wrk, `http://127.0.0.1:${port}/product`]);
  const e = r.errors;
  return {
    requests: r.requests,
    rps: r.requests / (r.duration_us / 1e6),
    p50Ms: r.latency_us.p50 / 1000,
    p99Ms: r.latency_us.p99 / 1000,
    errors: e.connect + e.read + e.write + e.status + e.timeout,
  };
}

/** Samples RSS every 100 ms while `work` runs; returns its result plus the peak RSS and the samples. */
export async function withRssSampling(pid, work) {
  const samples = [];
  const timer = setInterval(() => samples.push(rssMb(pid)), 100);
  try {
    const result = await work();
    samples.push(rssMb(pid));
    return { result, rssPeakMb: max(samples), samples };
  } finally {
    clearInterval(timer);
  }
}

/** The value of one Prometheus series summed over the label sets that match `labels` (regexps). */
function metricSum(text, name, labels = {}) {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/);
    if (!m || m[1] !== name) continue;
    const set = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, re]) => re.test(set[k] ?? ''))) sum += Number(m[3]);
  }
  return sum;
}

/** The service's own tracing self-metrics: proves no span was dropped or failed to export. */
export async function scrapeSdkCounters(metricsPort) {
  try {
    const { body } = await request(metricsPort, 'GET', '/metrics');
    return {
      dropped: metricSum(body, 'otel_sdk_processor_span_processed_total', { error_type: /^queue_full$/ }),
      exportFailed: metricSum(body, 'otel_sdk_exporter_span_exported_total', { error_type: /./ }),
    };
  } catch {
    return undefined;
  }
}

/** Open-loop load at `rate` req/s (bench/load-open.mjs): latency from the intended send times. */
export const openLoad = (port, seconds, rate) =>
  runJson('OPENLOOP_JSON', NODE, [path.join(BENCH, 'load-open.mjs'), JSON.stringify({ port, path: '/product', duration: seconds, rate, connections: 64 })]);

export async function checkResponses(name, port) {
  const post = await request(port, 'POST', '/product', '{"name":"bench"}');
  const id = post.status === 201 ? JSON.parse(post.body).product_id : undefined;
  // The range is the service's tests' (test/product-id.test.ts); here, that the answer is one.
  if (!Number.isInteger(id) || id < 1) {
    throw new Error(`${name}: POST /product answered ${post.status} ${post.body}`);
  }
  const health = await request(port, 'GET', '/health');
  if (health.status !== 200 || health.body !== 'ok') throw new Error(`${name}: GET /health answered ${health.status} ${health.body}`);
}

export function machineInfo(pinned) {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  return {
    nproc: CORES,
    cpu: cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown',
    memGb: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    pinned: PIN ? pinned : 'not pinned (fewer than 2 cores)',
  };
}
