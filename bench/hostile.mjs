// Hostile clients and bad days (issue #12): every class of abusive client or broken environment
// the service has to survive, run against the built service started as production starts it
// (`node dist/main.js`, pinned to core 0; clients, probes and this harness on core 1). For each
// case it records what was sent, what came back, the peak RSS of the service (VmRSS every 100 ms)
// and a verdict, writes bench/results/hostile.md and bench/results/hostile.json, and exits 1 if any
// case did not get the expected answer.
//
// Usage: npm run build && sh scripts/node.sh bench/hostile.mjs [--only 1,5,7]
//
// HTTP-level clients speak raw TCP (node:net): most of these requests are ones no HTTP client
// would send, and "never reads its answers" or "resets mid-body" need control of the socket.
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import {
  BENCH, LOAD_CORE, NODE, PIN, ROOT, SERVER_CORE,
  cleanEnv, freePorts, machineInfo, max, pinned, request, rssMb, scrapeSdkCounters, snapshotService, withRssSampling,
} from './lib.mjs';
import { bytesOf, messages } from './otlp-protobuf.mjs';
import { startSink as startOtlpSink } from './otlp-sink.mjs';

const RESULTS = path.join(BENCH, 'results');
/** Service logs, the FIFO of class 7 (gitignored, as every bench/results/*.tmp). */
const WORK = path.join(RESULTS, 'hostile.tmp');
/** Our own snapshot directory, so that a concurrent `npm run bench` cannot remove it under us. */
const SNAPSHOT = 'hostile-app.tmp';
const SELF = fileURLToPath(import.meta.url);
const MB = 1024 * 1024;

/** The snapshot of dist/ the services run from (set by main()). */
let serviceDir = ROOT;

// =============================================================================================
// Shared helpers: the service process, raw HTTP, probes, load workers

/**
 * Copies dist/ and package.json (snapshotService) and checks that dist/ did not change while it
 * was copied: a rebuild that started at that moment would leave a mix of two builds.
 */
function takeSnapshot() {
  const listing = () => fs.readdirSync(path.join(ROOT, 'dist'))
    .map((name) => { const s = fs.statSync(path.join(ROOT, 'dist', name)); return `${name}:${s.size}:${s.mtimeMs}`; })
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
 * 384 Mi memory limit, and 16 MiB semi-spaces. This machine puts the service in no memory cgroup,
 * where the percentage would apply to the host's 24 GiB, so the pod's heap is written out.
 */
const POD_HEAP = '--max-old-space-size=230 --max-semi-space-size=16';

/**
 * Starts the snapshot with the production command line on free ports, pinned to core 0, stdout to
 * a file (or `stdoutFd`: class 7's FIFO), stderr to a file, and samples its VmRSS every 100 ms
 * until it exits. Resolves once /health answers 200; with `allowExit` also when it exits first
 * (configuration errors).
 */
async function startService(name, env = {}, { stdoutFd, allowExit = false } = {}) {
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
  const sampler = setInterval(() => { peak = Math.max(peak, rssMb(child.pid) || 0); }, 100);
  let exited = null;
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => {
    clearInterval(sampler);
    exited = { code, signal, atMs: performance.now() };
    resolve(exited);
  }));

  const svc = {
    name, child, pid: child.pid, port, metricsPort, stdoutPath, stderrPath, exit,
    startupMs: NaN,
    exited: () => exited,
    peakRssMb: () => (peak > 0 ? peak : NaN),
    stderrLines: () => fs.readFileSync(stderrPath, 'utf8').split('\n').filter((l) => l.trim() !== ''),
    /** stdout lines parsed as JSON (non-JSON lines as {raw}). */
    logLines: () => fs.readFileSync(stdoutPath, 'utf8').split('\n').filter(Boolean).map((l) => {
      try { return JSON.parse(l); } catch { return { raw: l }; }
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

  for (;;) {
    if (exited) {
      if (allowExit) return svc;
      throw new Error(`${name} exited during start-up (${JSON.stringify(exited)}): ${svc.stderrLines().join(' / ').slice(0, 500)}`);
    }
    if (performance.now() - t0 > 30_000) throw new Error(`${name} did not answer /health within 30 s`);
    try {
      if ((await request(port, 'GET', '/health', undefined, 1000)).status === 200) break;
    } catch { /* not listening yet */ }
    await sleep(5);
  }
  svc.startupMs = performance.now() - t0;
  return svc;
}

/**
 * Sends raw bytes on a fresh connection and collects what comes back until the server closes the
 * connection or `waitMs` passes. `closed` is 'FIN' or 'reset' when the server closed it, else null.
 */
function rawExchange(port, payload, { waitMs = 2000 } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    const chunks = [];
    let settled = false;
    const done = (closed) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ raw: Buffer.concat(chunks).toString('latin1'), closed, ms: performance.now() - t0 });
    };
    const timer = setTimeout(() => done(null), waitMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('end', () => done('FIN'));
    socket.on('error', (err) => done(err.code === 'ECONNRESET' || err.code === 'EPIPE' ? 'reset' : `error ${err.code}`));
    socket.on('close', () => done('FIN'));
    socket.write(payload);
  });
}

/** Every complete HTTP/1.x response in `raw`, in order (interim 1xx answers included). */
function parseResponses(raw) {
  const out = [];
  let at = 0;
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const [statusLine, ...lines] = raw.slice(at, end).split('\r\n');
    const headers = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(statusLine.split(' ')[1]);
    let bodyEnd = end + 4;
    if (status >= 200 && status !== 204 && status !== 304) {
      if (headers['content-length'] !== undefined) bodyEnd += Number(headers['content-length']);
      else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) bodyEnd = raw.indexOf('\r\n0\r\n\r\n', end) + 7;
      else bodyEnd = raw.length; // delimited by the close
    }
    out.push({ status, statusLine, headers, body: raw.slice(end + 4, bodyEnd) });
    at = bodyEnd;
  }
  return out;
}

const isProblem = (res) => (res.headers['content-type'] ?? '').startsWith('application/problem+json');

/** "400 problem+json nosniff, closed (FIN) in 3 ms": one answer in table length. */
function describeExchange(exchange, responses) {
  const parts = responses.map((res) => {
    const type = res.headers['content-type'];
    const shortType = type === undefined ? 'no type' : type.replace(/^application\//, '').replace(/;.*$/, '');
    return `${res.status} ${shortType}${res.headers['x-content-type-options'] === 'nosniff' ? ' nosniff' : ''}`;
  });
  if (parts.length === 0) parts.push(exchange.raw.length ? `unparsed ${JSON.stringify(exchange.raw.slice(0, 40))}` : 'nothing');
  const close = exchange.closed ? `closed (${exchange.closed}) in ${Math.round(exchange.ms)} ms` : `left open ${Math.round(exchange.ms)} ms`;
  return `${parts.join(' + ')}; ${close}`;
}

/** One raw request, checked for the expected status, the problem shape, nosniff, one answer and (optionally) the close. */
async function rawCase(port, { sent, payload, status, mustClose = true }) {
  const exchange = await rawExchange(port, payload);
  const responses = parseResponses(exchange.raw);
  const [first] = responses;
  const failures = [];
  if (first === undefined) failures.push(`expected ${status}, got no answer`);
  else {
    if (first.status !== status) failures.push(`expected ${status}`);
    if (first.status >= 400 && !isProblem(first)) failures.push('not problem+json');
    if (first.headers['x-content-type-options'] !== 'nosniff') failures.push('no nosniff');
  }
  if (responses.length > 1) failures.push(`${responses.length} answers: bytes after the first request were parsed as another`);
  if (mustClose && !exchange.closed) failures.push('connection not closed');
  return { sent, got: describeExchange(exchange, responses), failures, details: { raw: exchange.raw.slice(0, 600), closed: exchange.closed } };
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
function startHealthProbe(port, everyMs = 100) {
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

const health = (h) => `/health ${h.probes - h.failures}/${h.probes} ok, p50 ${ms(h.p50Ms)}, p99 ${ms(h.p99Ms)}, max ${ms(h.maxMs)}`;
const ms = (x) => (Number.isFinite(x) ? `${x < 10 ? x.toFixed(1) : Math.round(x)} ms` : '–');

/**
 * Runs a load worker (this file with --worker, below) pinned to core 1, so that generating load
 * does not slow down this harness's probes and samplers; resolves the JSON it prints.
 */
function runWorker(kind, options) {
  const [cmd, argv] = pinned(LOAD_CORE, NODE, [SELF, '--worker', kind, JSON.stringify(options)]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('HOSTILE_WORKER '));
      if (code === 0 && line) resolve(JSON.parse(line.slice('HOSTILE_WORKER '.length)));
      else reject(new Error(`worker ${kind} exited ${code}: ${out.slice(-500)}`));
    });
  });
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

/** Waits for the socket to connect (or fail): many at once would otherwise overflow the accept backlog unnoticed. */
const connected = (socket) => new Promise((resolve) => {
  socket.once('connect', () => resolve(true));
  socket.once('error', () => resolve(false));
});

// =============================================================================================
// The classes: each returns rows {sent, got, failures, rssMb?, details?}

/** 1. Framing that two parsers could read differently: the bytes after the first request must never be served. */
async function requestSmuggling(ctx) {
  // At debug the service logs the parser's error code with each refusal: recorded with the answer.
  const svc = await ctx.start('smuggling', { LOG_LEVEL: 'debug' });
  // Answered as a second response only if the bytes before it were framed differently than sent.
  const next = 'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n';
  const post = 'POST /product HTTP/1.1\r\nHost: localhost\r\n';
  const cases = [
    ['`Content-Length: 4` and `Transfer-Encoding: chunked`, then a GET', `${post}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${next}`],
    ['`Content-Length: 5` and `Content-Length: 6`, then a GET', `${post}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!${next}`],
    ['`Transfer-Encoding: chunked, identity`, then a GET', `${post}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${next}`],
    ['`Transfer-Encoding : chunked` (space before the colon), then a GET', `${post}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${next}`],
    ['`Transfer-Encoding: \\x0bchunked` (vertical tab), then a GET', `${post}Transfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n${next}`],
    ['bare LF line endings, then a GET', `POST /product HTTP/1.1\nHost: localhost\nContent-Length: 0\n\n${next}`],
  ];
  const rows = [];
  for (const [sent, payload] of cases) {
    const seen = svc.logLines().length;
    const row = await rawCase(svc.port, { sent, payload, status: 400 });
    await sleep(400); // log lines reach stdout within 250 ms
    const codes = svc.logLines().slice(seen).map((l) => l.code).filter(Boolean);
    if (codes.length) row.got += ` (parser: ${codes.join(', ')})`;
    rows.push(row);
  }
  return rows;
}

/** 2. Requests Node's parser lets through but HTTP/1.1 refuses, and HTTP/1.0 with chunked framing. */
async function httpEdgeCases(ctx) {
  const svc = await ctx.start('edge-cases');
  const cases = [
    { sent: '`GET /health HTTP/1.1` without Host', payload: 'GET /health HTTP/1.1\r\n\r\n', status: 400, mustClose: false },
    { sent: '`GET /health` with two Host headers', payload: 'GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', status: 400, mustClose: false },
    { sent: '`GET /health HTTP/2.0`', payload: 'GET /health HTTP/2.0\r\nHost: localhost\r\n\r\n', status: 505, mustClose: false },
    { sent: '`POST /product` with `Expect: bogus`', payload: 'POST /product HTTP/1.1\r\nHost: localhost\r\nExpect: bogus\r\nContent-Length: 0\r\n\r\n', status: 417, mustClose: false },
    { sent: '`CONNECT example.com:443 HTTP/1.1`', payload: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', status: 405 },
    {
      sent: '`POST /product HTTP/1.0` with `Transfer-Encoding: chunked`',
      payload: 'POST /product HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
      status: 400,
    },
  ];
  const rows = [];
  for (const c of cases) rows.push(await rawCase(svc.port, c));
  return rows;
}

/**
 * 3. Clients that pipeline without ever reading: the answers would pile up in the server's memory.
 * First 40 connections that stay (the adversarial run's case), then 40 that reconnect at once
 * whenever the server closes them: a connection-rate flood, which no setting inside one process
 * absorbs (the ingress's connection limits do), recorded to show where that limit is.
 */
async function pipeliningFlood(ctx) {
  const rows = [];
  for (const reconnect of [false, true]) {
    const svc = await ctx.start(`pipelining${reconnect ? '-reconnecting' : ''}`);
    const probe = startHealthProbe(svc.port);
    const flood = await runWorker('pipeline-flood', { port: svc.port, connections: 40, seconds: 8, reconnect });
    const h = await probe.stop();
    const peak = svc.peakRssMb();
    rows.push({
      sent: `40 connections pipelining \`POST /product\` for 8 s, never reading${reconnect ? ', reconnecting at once when closed' : ''}`,
      got: `${flood.requestsWritten} requests written (${(flood.bytesWritten / MB).toFixed(0)} MB) on ${flood.opened} connections, ${flood.closedByServer} closed by the server; ${health(h)}`,
      failures: reconnect
        ? [...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`])]
        : [
            ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
            ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
          ],
      rssMb: peak,
      details: { flood, health: h },
    });
  }
  return rows;
}

/** 4. Connections held open for free: 500 trickling their headers, 5000 saying nothing. */
async function slowlorisAndIdle(ctx) {
  const svc = await ctx.start('slowloris');
  const t0 = performance.now();
  const track = (socket) => {
    const c = { socket, answer: '', closedAfterS: NaN, connectedAt: performance.now() };
    socket.on('data', (d) => { c.answer += d.toString('latin1'); });
    socket.on('error', () => {});
    socket.on('close', () => { c.closedAfterS = (performance.now() - c.connectedAt) / 1000; });
    return c;
  };
  const open = async (n) => {
    const all = [];
    // 250 at a time: a burst of thousands of SYNs overflows the accept backlog and costs 1 s retries.
    for (let i = 0; i < n; i += 250) {
      const batch = Array.from({ length: Math.min(250, n - i) }, () => net.connect(svc.port, '127.0.0.1'));
      await Promise.all(batch.map(connected));
      all.push(...batch.map(track));
    }
    return all;
  };
  const probe = startHealthProbe(svc.port);
  const header = 'GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ' + 'a'.repeat(100);
  const trickling = await open(500);
  let sentBytes = 0;
  const trickle = setInterval(() => {
    sentBytes++;
    for (const c of trickling) if (!c.socket.destroyed) c.socket.write(header[Math.min(sentBytes, header.length - 1)]);
  }, 1000);
  trickling.forEach((c) => c.socket.write(header[0]));
  const idle = await open(5000);
  const openedS = (performance.now() - t0) / 1000;
  // headersTimeout is 20 s and Node checks it every 5 s: everything should be cut off by ~25 s.
  const deadline = t0 + 27_000;
  while (performance.now() < deadline && [...trickling, ...idle].some((c) => !c.socket.destroyed)) await sleep(250);
  clearInterval(trickle);
  const h = await probe.stop();
  const summary = (conns) => {
    const closed = conns.filter((c) => Number.isFinite(c.closedAfterS));
    const statuses = {};
    for (const c of closed) {
      const status = c.answer ? (parseResponses(c.answer)[0]?.status ?? 'garbled') : 'none';
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
    return { closed: closed.length, statuses, closedAfterS: { min: Math.min(...closed.map((c) => c.closedAfterS)), max: max(closed.map((c) => c.closedAfterS)) } };
  };
  const t = summary(trickling);
  const i = summary(idle);
  for (const c of [...trickling, ...idle]) c.socket.destroy();
  const statusText = (s) => Object.entries(s.statuses).map(([k, v]) => `${v}× ${k}`).join(', ') || 'none';
  const span = (s) => (s.closed ? `after ${s.closedAfterS.min.toFixed(0)}–${s.closedAfterS.max.toFixed(0)} s` : '');
  const peak = svc.peakRssMb();
  return [{
    sent: `500 connections trickling headers 1 byte/s + 5000 idle connections (all open in ${openedS.toFixed(1)} s), watched ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    got: `trickling: ${t.closed}/500 closed ${span(t)} (${statusText(t)}); idle: ${i.closed}/5000 closed ${span(i)} (${statusText(i)}); ${health(h)}`,
    failures: [
      ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
      ...(t.closed === 500 && t.statuses[408] === 500 ? [] : ['not every trickling connection got 408']),
      ...(i.closed === 5000 ? [] : [`${5000 - i.closed} idle connections still open`]),
      ...(peak < 300 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 300 MB`]),
    ],
    details: { trickling: t, idle: i, health: h },
  }];
}

/** 5. Bodies over BODY_LIMIT (1 MB): refused early, never buffered, and the refusal reaches the client. */
async function oversizedBodies(ctx) {
  const rows = [];

  // A 100 MB chunked upload, reading while writing (as a streaming client does).
  {
    const svc = await ctx.start('oversized-chunked');
    const before = rssMb(svc.pid);
    const { result: r, rssPeakMb: peak, samples } = await withRssSampling(svc.pid, () => chunkedUpload(svc.port, 100 * MB));
    const status = parseResponses(r.answer)[0]?.status;
    rows.push({
      sent: '100 MB chunked `POST /product` in 64 KB chunks, reading, but sending on after the answer',
      got: `${status ?? 'no answer'} after ${(r.bytesSentAtAnswer / MB).toFixed(1)} MB sent, FIN after ${(r.bytesSentAtFin / MB).toFixed(1)} MB; ${r.ending} at ${(r.bytesSent / MB).toFixed(1)} MB; RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB during`,
      failures: [
        ...(status === 413 ? [] : ['expected 413']),
        // Flat: well under the upload. The bytes the server reads and discards arrive in 64 KB
        // buffers that are garbage until V8's next collection, so some growth is expected.
        ...(peak - before < 50 ? [] : [`RSS grew ${(peak - before).toFixed(0)} MB (≥ 50)`]),
      ],
      rssMb: peak,
      details: { ...r, answer: r.answer.slice(0, 300), rssBeforeMb: before, rssSamplesMb: samples.map((x) => Math.round(x)) },
    });
  }

  // 20 naive clients: the whole 20 MB body first, and only then read.
  {
    const svc = await ctx.start('oversized-naive');
    const results = await Promise.all(Array.from({ length: 20 }, () => writeAllThenRead(svc.port, 20 * MB)));
    const got413 = results.filter((r) => parseResponses(r.answer)[0]?.status === 413).length;
    const endings = tally(results.map((r) => r.ending));
    rows.push({
      sent: '20 clients × 20 MB body with `Content-Length`, writing all of it before reading',
      got: `${got413}/20 read the 413; ${Object.entries(endings).map(([k, v]) => `${v}× ${k}`).join(', ')}`,
      failures: got413 === 20 ? [] : [`${20 - got413} of 20 never saw the 413`],
      rssMb: svc.peakRssMb(),
      details: { endings, bytesSent: results.map((r) => r.bytesSent) },
    });
  }

  // 50 clients that wait for 100 Continue before sending an over-limit body.
  {
    const svc = await ctx.start('oversized-expect');
    const payload = 'POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n';
    const exchanges = await Promise.all(Array.from({ length: 50 }, () => rawExchange(svc.port, payload, { waitMs: 3000 })));
    const answers = exchanges.map((e) => parseResponses(e.raw));
    const continued = answers.filter((a) => a.some((res) => res.status === 100)).length;
    const refused = answers.filter((a) => a.some((res) => res.status === 413)).length;
    rows.push({
      sent: '50 clients: `Expect: 100-continue` with `Content-Length: 10485760`, headers only',
      got: `${continued}/50 got 100 Continue, ${refused}/50 got 413; ${tally(exchanges.map((e) => e.closed ?? 'left open'))['FIN'] ?? 0}/50 closed`,
      failures: [
        ...(continued === 0 ? [] : [`${continued} were asked for the body`]),
        ...(refused === 50 ? [] : [`${50 - refused} got no 413`]),
      ],
      rssMb: svc.peakRssMb(),
    });
  }
  return rows;
}

const tally = (xs) => xs.reduce((acc, x) => ({ ...acc, [x]: (acc[x] ?? 0) + 1 }), {});

/**
 * Streams `total` bytes as 64 KB chunks and goes on after the answer, as a client that ignores it
 * does, until everything is sent or the server closes the connection.
 */
function chunkedUpload(port, total) {
  return new Promise((resolve) => {
    // Half-open allowed: the server's FIN after its answer does not stop this client from sending.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    let answer = '';
    let bytesSent = 0;
    let bytesSentAtAnswer = NaN;
    let bytesSentAtFin = NaN;
    let ending = null;
    const finish = (why) => {
      if (ending) return;
      ending = why;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answer, bytesSent, bytesSentAtAnswer, bytesSentAtFin, ending });
    };
    const timer = setTimeout(() => finish('timeout'), 30_000);
    const pump = () => {
      while (!ending && bytesSent < total) {
        bytesSent += chunk.length;
        if (!socket.write(frame)) return;
      }
      if (bytesSent >= total && !ending) socket.end('0\r\n\r\n', () => finish('all sent'));
    };
    socket.on('data', (d) => {
      if (answer === '') bytesSentAtAnswer = bytesSent;
      answer += d.toString('latin1');
    });
    socket.on('drain', pump);
    socket.on('end', () => { bytesSentAtFin = bytesSent; });
    socket.on('error', (err) => finish(`reset by the server (${err.code})`));
    socket.write('POST /product HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n');
    pump();
  });
}

/**
 * A naive client: writes headers and the whole `size`-byte body, and only then reads. The socket is
 * paused before it connects, so nothing is read until then: an answer the server's reset destroys
 * in the kernel is lost, exactly as it would be for such a client.
 */
function writeAllThenRead(port, size) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    let answer = '';
    let bytesSent = 0;
    let ending = null;
    const finish = (why) => {
      if (ending) return;
      ending = why;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answer, bytesSent, ending });
    };
    const timer = setTimeout(() => finish('timeout'), 30_000);
    socket.on('error', (err) => finish(`reset (${err.code})${answer ? ' after the answer' : ''}`));
    socket.on('data', (d) => { answer += d.toString('latin1'); });
    socket.on('end', () => finish('FIN'));
    const chunk = Buffer.alloc(256 * 1024, 'x');
    socket.write(`POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${size}\r\n\r\n`);
    const pump = () => {
      while (!ending && bytesSent < size) {
        const n = Math.min(chunk.length, size - bytesSent);
        bytesSent += n;
        const last = bytesSent === size;
        // Reading starts once the last byte is handed to the kernel.
        if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n), last ? () => socket.resume() : undefined)) return;
      }
    };
    socket.on('drain', pump);
    pump();
  });
}

/** 6. Clients that go away mid-body: not the server's fault, so no 5xx and no error log, but counted as 499. */
async function clientDrops(ctx) {
  const svc = await ctx.start('client-drops');
  const head = 'POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n';
  await Promise.all(Array.from({ length: 200 }, async (_, i) => {
    const socket = net.connect(svc.port, '127.0.0.1');
    socket.on('error', () => {});
    await connected(socket);
    socket.write(head + 'x'.repeat(500));
    await sleep(50); // the request reaches the application before the client leaves
    // Half close politely (FIN), half abort (RST): the two ways a client disappears.
    if (i % 2 === 0) socket.destroy();
    else socket.resetAndDestroy();
  }));
  await sleep(500);
  const text = await svc.metrics();
  const series = { http_request_method: /^POST$/, http_route: /^\/product$/ };
  const fiveXx = metricSum(text, 'http_server_request_duration_seconds_count', { ...series, http_response_status_code: /^5\d\d$/ });
  const c499 = metricSum(text, 'http_server_request_duration_seconds_count', { ...series, http_response_status_code: /^499$/ });
  const errorLines = svc.logLines().filter((l) => l.level === 'error' || l.level === 'fatal');
  return [{
    sent: '200 clients: `Content-Length: 1000`, 500 bytes, then 100 close (FIN) and 100 reset (RST)',
    got: `POST /product 5xx: ${fiveXx}, 499: ${c499}; ${errorLines.length} error/fatal log lines`,
    failures: [
      ...(fiveXx === 0 ? [] : [`${fiveXx} counted as 5xx`]),
      ...(c499 === 200 ? [] : [`499 counts ${c499}, not 200`]),
      ...(errorLines.length === 0 ? [] : [`error log: ${JSON.stringify(errorLines[0]).slice(0, 120)}`]),
    ],
    details: { fiveXx, c499, errorLines: errorLines.slice(0, 5) },
  }];
}

/** 7. stdout is a pipe nobody reads any more (a stuck log shipper): requests, memory and exit must not depend on it. */
async function stuckStdout(ctx) {
  fs.mkdirSync(WORK, { recursive: true });
  const fifo = path.join(WORK, 'stdout.fifo');
  const headPath = path.join(WORK, 'stuck-stdout.head');
  fs.rmSync(fifo, { force: true });
  await new Promise((resolve, reject) => spawn('mkfifo', [fifo]).on('exit', (c) => (c === 0 ? resolve() : reject(new Error('mkfifo failed')))));
  // The reader keeps the FIFO open but stops reading after the first 5 lines, as a stuck shipper does.
  const reader = spawn('sh', ['-c', 'exec 0<"$1"; head -n 5 > "$2"; exec sleep 600', 'sh', fifo, headPath], { stdio: 'ignore' });
  ctx.onCleanup(() => reader.kill('SIGKILL'));
  // Opened in the thread pool: open(2) of a FIFO for writing waits for its reader.
  const handle = await Promise.race([fs.promises.open(fifo, 'w'), sleep(5000).then(() => { throw new Error('FIFO reader did not open'); })]);
  const svc = await ctx.start('stuck-stdout', { SHUTDOWN_TIMEOUT: '5' }, { stdoutFd: handle.fd });
  await handle.close();
  const probe = startHealthProbe(svc.port);
  const load = await runWorker('keepalive', { port: svc.port, connections: 8, seconds: 20 });
  const h = await probe.stop();
  const dropped = metricSum(await svc.metrics(), 'product_service_log_lines_dropped_total');
  const exit = await svc.stop('SIGTERM', 15_000);
  const peak = svc.peakRssMb();
  const read = fs.existsSync(headPath) ? fs.readFileSync(headPath, 'utf8').split('\n').filter(Boolean).length : 0;
  // The same load with stdout to a file: tells what the stuck pipe costs apart from what the load costs.
  const control = await ctx.start('stuck-stdout-control');
  const controlLoad = await runWorker('keepalive', { port: control.port, connections: 8, seconds: 20 });
  await control.stop();
  return [{
    sent: 'stdout = FIFO whose reader stops after 5 lines; 20 s `POST /product` on 8 keep-alive connections; then SIGTERM (`SHUTDOWN_TIMEOUT=5`)',
    got: `${load.ok} answered (${statusText(load)}); ${health(h)}; ${dropped} log lines dropped; exit ${exit.code ?? exit.signal} ${(exit.ms / 1000).toFixed(1)} s after SIGTERM (reader got ${read} lines); same load, stdout to a file: ${controlLoad.ok} answered, peak ${control.peakRssMb().toFixed(0)} MB`,
    failures: [
      ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
      // The load alone grows the heap; the stuck pipe may add its 8 MiB buffer and little more.
      ...(peak < control.peakRssMb() + 24 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ ${control.peakRssMb().toFixed(0)} MB (stdout to a file) + 24 MB`]),
      ...(dropped > 0 ? [] : ['no dropped lines counted']),
      ...(exit.code === 0 && exit.ms <= 5000 ? [] : [`exit ${exit.code ?? exit.signal} after ${(exit.ms / 1000).toFixed(1)} s (expected 0 within 5 s)`]),
      ...(load.failed === 0 ? [] : [`${load.failed} requests failed`]),
    ],
    rssMb: peak,
    details: { load, health: h, dropped, exit, control: { load: controlLoad, peakRssMb: control.peakRssMb() } },
  }];
}

const statusText = (load) => Object.entries({ ...load.statuses, ...load.errors }).map(([k, v]) => `${v}× ${k}`).join(', ') || 'nothing';

/** 8. A collector that accepts connections and never answers, while clients send 15 KB User-Agents. */
async function hangingCollector(ctx) {
  const rows = [];
  const heaps = [[POD_HEAP, 'the heap the chart gives in its 384 Mi pod']];
  for (const [flag, why] of heaps) {
    const heapLimitMb = Number(execFileSync(NODE, [...flag.split(" "), '-p', 'require("v8").getHeapStatistics().heap_size_limit']).toString()) / MB;
    const collector = await startHangingCollector();
    ctx.onCleanup(() => collector.close());
    const svc = await ctx.start(`hanging-collector${rows.length}`, {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      NODE_OPTIONS: flag,
      SHUTDOWN_TIMEOUT: '5',
    });
    const probe = startHealthProbe(svc.port);
    const load = await runWorker('keepalive', { port: svc.port, connections: 8, seconds: 15, userAgentBytes: 15_000 });
    const h = await probe.stop();
    const sdk = await scrapeSdkCounters(svc.metricsPort);
    const exit = await svc.stop('SIGTERM', 15_000);
    const spans = collector.requests.flatMap((body) => decodeSpans(body));
    const longest = max(spans.map((s) => (s['user_agent.original'] ?? '').length));
    const peak = svc.peakRssMb();
    rows.push({
      sent: `OTLP endpoint that never answers; 15 s \`POST /product\` with 15 KB User-Agents on 8 connections; \`NODE_OPTIONS=${flag}\` (${why}; V8 heap limit ${heapLimitMb.toFixed(0)} MB)`,
      got: `${load.ok} answered (${statusText(load)}); collector got ${collector.requests.length} exports, ${spans.length} spans, longest user_agent.original ${longest} chars; ${sdk?.dropped ?? '?'} spans dropped (queue full); ${health(h)}; exit ${exit.code ?? exit.signal} in ${(exit.ms / 1000).toFixed(1)} s`,
      failures: [
        ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
        ...(spans.length > 0 ? [] : ['no export reached the collector']),
        ...(longest <= 1024 ? [] : [`attribute of ${longest} chars (limit 1024)`]),
        ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
        ...(load.failed === 0 ? [] : [`${load.failed} requests failed`]),
      ],
      rssMb: peak,
      details: { flag, heapLimitMb, load, health: h, sdk, exit, exports: collector.requests.length, spans: spans.length, longest },
    });
  }
  return rows;
}

/** An OTLP/HTTP endpoint that reads every export request and never answers it. */
async function startHangingCollector() {
  const requests = [];
  const server = http.createServer((req) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push(req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => { server.closeAllConnections(); server.close(); },
  };
}

/** The string attributes of every span of an ExportTraceServiceRequest (resource_spans 1 > scope_spans 2 > spans 2 > attributes 9). */
function decodeSpans(body) {
  const spans = [];
  for (const resourceSpans of messages(body, 1)) {
    for (const scopeSpans of messages(resourceSpans, 2)) {
      for (const span of messages(scopeSpans, 2)) {
        const attributes = {};
        for (const keyValue of messages(span, 9)) {
          const key = bytesOf(keyValue, 1).toString('utf8');
          const text = messages(bytesOf(keyValue, 2), 1)[0]; // AnyValue.string_value
          if (key && text) attributes[key] = text.toString('utf8');
        }
        spans.push(attributes);
      }
    }
  }
  return spans;
}

/** 9. Can a caller force its request to be sampled? With parentbased_* yes (as specified), with traceidratio no. */
async function forcedSampling(ctx) {
  const rows = [];
  for (const [sampler, expectation] of [['parentbased_traceidratio', (n) => n === 200], ['traceidratio', (n) => n <= 10]]) {
    const sink = await startOtlpSink();
    ctx.onCleanup(() => sink.close());
    const svc = await ctx.start(`sampling-${sampler}`, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
      OTEL_TRACES_SAMPLER: sampler,
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    let answered = 0;
    for (let i = 0; i < 200; i++) {
      // Fixed trace ids (a hash of i), so that the ratio sampler's count is the same on every run.
      const traceId = crypto.createHash('sha256').update(`hostile-${i}`).digest('hex').slice(0, 32);
      const traceparent = `00-${traceId}-${traceId.slice(0, 16)}-01`;
      const res = await new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: svc.port, method: 'POST', path: '/product', agent: false, headers: { traceparent } }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); });
        req.on('error', reject);
        req.end();
      });
      if (res === 201) answered++;
    }
    const exit = await svc.stop(); // flushes the spans still queued
    const spans = sink.stats().traces.items;
    rows.push({
      sent: `200 \`POST /product\` with \`traceparent …-01\`; \`OTEL_TRACES_SAMPLER=${sampler}\`, \`_ARG=0.01\``,
      got: `${answered} answered 201; ${spans} spans received (expected ${sampler === 'traceidratio' ? '~2' : '200'}); exit ${exit.code}`,
      failures: [
        ...(expectation(spans) ? [] : [`${spans} spans`]),
        ...(answered === 200 ? [] : [`${200 - answered} requests not answered 201`]),
      ],
      rssMb: svc.peakRssMb(),
      details: { spans, answered, exit },
    });
  }
  return rows;
}

/** 10. Configuration mistakes: one stderr line each; the service's own settings stop it, OTEL ones do not. */
async function badConfiguration(ctx) {
  const cases = [
    { env: { BODY_LIMIT: '1.5' }, fatal: true },
    { env: { PORT: 'abc' }, fatal: true },
    { env: { OTEL_RESOURCE_ATTRIBUTES: 'team=shop,broken' }, fatal: false },
    { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'not-a-url' }, fatal: false },
  ];
  const rows = [];
  for (const [i, c] of cases.entries()) {
    const [name, value] = Object.entries(c.env)[0];
    const svc = await ctx.start(`config-${i}`, c.env, { allowExit: true });
    let outcome;
    if (svc.exited()) {
      const e = svc.exited();
      outcome = { code: e.code, running: false };
    } else {
      // Still running: a request gives the exporter something to send, SIGTERM flushes it, so a
      // complaint that only comes at export time is seen too.
      const res = await request(svc.port, 'POST', '/product', '{}');
      const exit = await svc.stop();
      outcome = { code: exit.code, running: true, status: res.status };
    }
    const lines = svc.stderrLines();
    rows.push({
      sent: `\`${name}=${value}\``,
      got: `${outcome.running ? `kept running (POST → ${outcome.status}), exit ${outcome.code} on SIGTERM` : `exit ${outcome.code} before listening`}; stderr ${lines.length} line${lines.length === 1 ? '' : 's'}: ${lines.map((l) => `\`${l.slice(0, 160)}\``).join(' / ')}`,
      failures: [
        ...(c.fatal && !(outcome.code === 1 && !outcome.running) ? ['expected exit 1 before listening'] : []),
        ...(!c.fatal && !(outcome.running && outcome.status === 201 && outcome.code === 0) ? ['expected to keep running'] : []),
        ...(lines.length === 1 ? [] : [`${lines.length} stderr lines, expected 1`]),
      ],
      rssMb: svc.peakRssMb(),
      details: { outcome, stderr: lines },
    });
  }
  return rows;
}

/**
 * 11. SIGTERM under keep-alive load with SHUTDOWN_DELAY=1. First as production sees it: the
 * balancer stops sending 0.5 s after the signal (within the delay), and no request may fail. Then
 * clients that never stop: a connection still in the listen backlog when the listener closes is
 * reset by the kernel, but a request on a kept-alive connection must never fail.
 */
async function shutdownUnderLoad(ctx) {
  const rows = [];
  for (const balanced of [true, false]) {
    const svc = await ctx.start(`shutdown-${balanced ? 'balanced' : 'unbounded'}`, { SHUTDOWN_DELAY: '1' });
    const sigtermAt = Date.now() + 2500;
    const loadDone = runWorker('keepalive', {
      port: svc.port, connections: 16, seconds: 10, countAfter: sigtermAt, stopAt: balanced ? sigtermAt + 500 : undefined,
    });
    await sleep(sigtermAt - Date.now());
    const exit = await svc.stop('SIGTERM');
    const load = await loadDone;
    const failures = balanced
      ? (load.failed === 0 ? [] : [`${load.failed} requests failed`])
      : (load.failedReused === 0 && Object.keys(load.statuses).every((s) => s === '201') ? [] : [`${load.failedReused} requests failed on a kept-alive connection`]);
    rows.push({
      sent: balanced
        ? '`POST /product` on 16 keep-alive connections, SIGTERM 2.5 s in, `SHUTDOWN_DELAY=1`; clients stop 0.5 s after SIGTERM (as a balancer does)'
        : 'the same, but clients never stop: they send until refused',
      got: `${load.ok} answered (${statusText(load)}), ${load.okAfter} of them after SIGTERM; ${load.refused} connects refused; exit ${exit.code ?? exit.signal} ${(exit.ms / 1000).toFixed(2)} s after SIGTERM`,
      failures: [...failures, ...(exit.code === 0 ? [] : [`exit ${exit.code ?? exit.signal}`]), ...(load.okAfter > 0 ? [] : ['nothing was served after SIGTERM'])],
      rssMb: svc.peakRssMb(),
      details: { load, exit },
    });
  }
  return rows;
}

// =============================================================================================
// Load workers (run as child processes by runWorker)

const WORKERS = {
  /**
   * Closed loop over `connections` keep-alive connections: each sends the next `POST /product`
   * when the previous answer arrives, until `seconds` pass or `stopAt` (epoch ms). A loop ends
   * early when its connection is refused (the listener closed). failed = errors other than that
   * + non-201; failedReused = those on a connection kept alive from an earlier answer.
   */
  async keepalive(o) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
    const filler = o.userAgentBytes ? crypto.randomBytes(o.userAgentBytes).toString('base64').slice(0, o.userAgentBytes) : undefined;
    const statuses = {};
    const errors = {};
    let refused = 0;
    let failedReused = 0;
    const messages = {};
    let okAfter = 0;
    let sent = 0;
    const end = Date.now() + o.seconds * 1000;
    const body = '{"name":"hostile"}';
    const post = (onRequest) => new Promise((resolve, reject) => {
      const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      // A distinct value per request, as distinct clients would send.
      if (filler) headers['user-agent'] = `${sent}-${filler}`.slice(0, o.userAgentBytes);
      sent++;
      const req = http.request({ host: '127.0.0.1', port: o.port, method: 'POST', path: '/product', agent, headers, timeout: 10_000 }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
        res.on('error', reject);
      });
      onRequest(req);
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', reject);
      req.end(body);
    });
    const loop = async () => {
      while (Date.now() < Math.min(end, o.stopAt ?? Infinity)) {
        let req;
        try {
          const status = await post((r) => { req = r; });
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status === 201 && o.countAfter && Date.now() >= o.countAfter) okAfter++;
        } catch (err) {
          if (err.code === 'ECONNREFUSED') {
            refused++;
            return;
          }
          // Whether the request went on a connection kept alive from an earlier answer, or a new one.
          const key = `${err.code ?? err.message} on a ${req?.reusedSocket ? 'kept-alive' : 'new'} connection`;
          errors[key] = (errors[key] ?? 0) + 1;
          if (req?.reusedSocket) failedReused++;
          messages[err.message] = (messages[err.message] ?? 0) + 1;
          await sleep(10);
        }
      }
    };
    await Promise.all(Array.from({ length: o.connections }, loop));
    agent.destroy();
    const ok = statuses[201] ?? 0;
    const all = Object.values(statuses).reduce((a, b) => a + b, 0) + Object.values(errors).reduce((a, b) => a + b, 0);
    return { sent, ok, okAfter, statuses, errors, messages, refused, failed: all - ok, failedReused };
  },

  /**
   * `connections` connections each writing pipelined `POST /product` requests as fast as the socket
   * takes them and never reading; with `reconnect`, one that the server closes is replaced at once.
   */
  async 'pipeline-flood'(o) {
    const burst = Buffer.from('POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n'.repeat(256));
    const perBurst = 256;
    const end = Date.now() + o.seconds * 1000;
    let opened = 0;
    let closedByServer = 0;
    let bursts = 0;
    const connection = () => new Promise((resolve) => {
      const socket = net.connect(o.port, '127.0.0.1');
      socket.pause(); // before connecting: not a byte of the answers is ever read
      opened++;
      let done = false;
      const finish = (byServer) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (byServer) closedByServer++;
        socket.destroy();
        resolve();
      };
      const timer = setTimeout(() => finish(false), Math.max(0, end - Date.now()));
      const pump = () => {
        while (!done) {
          bursts++;
          if (!socket.write(burst)) return;
        }
      };
      socket.on('connect', pump);
      socket.on('drain', pump);
      socket.on('error', () => finish(true));
      socket.on('close', () => finish(true));
    });
    const loop = async () => {
      do await connection();
      while (o.reconnect && Date.now() < end);
    };
    await Promise.all(Array.from({ length: o.connections }, loop));
    return { opened, closedByServer, requestsWritten: bursts * perBurst, bytesWritten: bursts * burst.length };
  },
};

// =============================================================================================
// The run

const CLASSES = [
  ['1. Request smuggling', requestSmuggling],
  ['2. HTTP edge cases', httpEdgeCases],
  ['3. Pipelining flood', pipeliningFlood],
  ['4. Slowloris + idle', slowlorisAndIdle],
  ['5. Oversized bodies', oversizedBodies],
  ['6. Client drops mid-body', clientDrops],
  ['7. Stuck stdout', stuckStdout],
  ['8. Collector hanging', hangingCollector],
  ['9. Forced sampling', forcedSampling],
  ['10. Bad configuration', badConfiguration],
  ['11. Shutdown under load', shutdownUnderLoad],
];

/** Runs one class with its own services; a class that throws or hangs is one FAILED row, and the run goes on. */
async function runClass(title, fn) {
  const services = [];
  const cleanups = [];
  const ctx = {
    start: async (name, env, options) => {
      const svc = await startService(name, env, options);
      services.push(svc);
      return svc;
    },
    onCleanup: (f) => cleanups.push(f),
  };
  const t0 = performance.now();
  let rows;
  try {
    let timer;
    const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('class did not finish within 120 s')), 120_000); });
    rows = await Promise.race([fn(ctx), timeout]).finally(() => clearTimeout(timer));
  } catch (err) {
    rows = [{ sent: '–', got: `harness error: ${err.message.split('\n')[0]}`, failures: [err.message.split('\n')[0]] }];
  } finally {
    await Promise.all(services.map((svc) => svc.stop('SIGKILL')));
    for (const f of cleanups) {
      try { await f(); } catch { /* best effort */ }
    }
  }
  const peak = max(services.map((svc) => svc.peakRssMb()));
  const seconds = (performance.now() - t0) / 1000;
  return rows.map((row) => ({ class: title, ...row, rssMb: row.rssMb ?? peak, ok: row.failures.length === 0, seconds }));
}

const machine = () => machineInfo(`service on core ${SERVER_CORE}; clients, workers and harness on core ${LOAD_CORE}`);

const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');

function markdown(result) {
  const { meta, rows } = result;
  const m = meta.machine;
  const lines = [
    `Measured ${meta.date} on ${m.nproc} × ${m.cpu}, ${m.memGb} GiB, Linux ${m.kernel}, Node ${m.node} (${m.pinned}).`,
    `Command: \`${meta.command}\`; ${meta.seconds.toFixed(0)} s in all; ${result.passed} passed, ${result.failed} failed.`,
    '',
    '| class | what was sent | what came back | peak RSS MB | verdict |',
    '|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(`| ${cell(r.class)} | ${cell(r.sent)} | ${cell(r.got)} | ${Number.isFinite(r.rssMb) ? r.rssMb.toFixed(0) : '–'} | ${r.ok ? 'ok' : cell(`FAILED: ${r.failures.join('; ')}`)} |`);
  }
  lines.push('');
  lines.push('Peak RSS: VmRSS of the service process sampled every 100 ms from spawn to exit (per case where a case has its own process, else per class). '
    + `Service defaults unless the row says otherwise (BODY_LIMIT 1mb, LOG_LEVEL info, stdout to a file); /health probes open a new connection every 100 ms, 2 s timeout each (the chart's readiness probe timeout). `
    + 'Details (raw answers, counts, RSS samples) are in hostile.json; service logs in hostile.tmp/.');
  return lines.join('\n') + '\n';
}

async function main() {
  const only = (() => {
    const i = process.argv.indexOf('--only');
    return i > 0 ? new Set(process.argv[i + 1].split(',').map(Number)) : undefined;
  })();
  const started = new Date();
  const t0 = performance.now();
  // The harness (probes, samplers, raw clients) shares core 1 with the workers; core 0 is the service's.
  if (PIN) execFileSync('taskset', ['-a', '-p', '-c', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  serviceDir = takeSnapshot();
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  const rows = [];
  for (const [index, [title, fn]] of CLASSES.entries()) {
    if (only && !only.has(index + 1)) continue;
    const classRows = await runClass(title, fn);
    for (const r of classRows) console.error(`${r.ok ? 'ok    ' : 'FAILED'} ${title}: ${r.sent} -> ${r.got}${r.ok ? '' : ` [${r.failures.join('; ')}]`}`);
    rows.push(...classRows);
  }
  const result = {
    meta: {
      date: started.toISOString(),
      machine: machine(),
      command: `sh scripts/node.sh bench/hostile.mjs ${process.argv.slice(2).join(' ')}`.trim(),
      service: `dist/ and package.json copied to ${path.relative(ROOT, serviceDir)} at the start; started as \`node dist/main.js\``,
      seconds: (performance.now() - t0) / 1000,
    },
    passed: rows.filter((r) => r.ok).length,
    failed: rows.filter((r) => !r.ok).length,
    rows,
  };
  // A partial run (--only) must not replace the full results: it stays in the work directory.
  const outDir = only ? WORK : RESULTS;
  fs.writeFileSync(path.join(outDir, 'hostile.json'), JSON.stringify(result, null, 2) + '\n');
  const md = markdown(result);
  fs.writeFileSync(path.join(outDir, 'hostile.md'), md);
  process.stdout.write('\n' + md);
  process.exitCode = result.failed === 0 ? 0 : 1;
}

if (process.argv[2] === '--worker') {
  const result = await WORKERS[process.argv[3]](JSON.parse(process.argv[4]));
  process.stdout.write(`HOSTILE_WORKER ${JSON.stringify(result)}\n`);
  process.exit(0);
} else {
  await main();
}
