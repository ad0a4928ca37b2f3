// Start-up only: spawn → first 200 on GET /health, for plain node:http and for the service with
// tracing off, on without the bundle, on with it, each with and without Node's compile cache.
// Interleaved (A B C … A B C …) because this machine is shared and noisy.
//
//   npm run build && sh scripts/node.sh bench/startup.mjs [--rounds 15] [--configs plain-http,bundled,...]
//
// The service runs from copies of dist/ in bench/results/startup.tmp/ (gitignored): `bundled` as
// built, `unbundled` without dist/observability/telemetry.bundle.js (main.js then requires
// dist/observability/telemetry.js and the SDK from node_modules). Tracing on = an OTLP endpoint on a closed
// local port, so the exporter is configured (nothing listens there; no span is sent at start-up).
// Node's compile cache is emptied, then filled by one untimed start (as the image build does).
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { PIN, RESULTS, ROOT, cpuMicros, freePorts, median, min, max, pinToLoadCore, rssMb, snapshotService, startServer } from './lib.mjs';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '15' }, configs: { type: 'string' } } });

const TMP = path.join(RESULTS, 'startup.tmp');
const BUNDLE = 'observability/telemetry.bundle.js';

function prepare() {
  if (!fs.existsSync(path.join(ROOT, 'dist', BUNDLE))) throw new Error(`dist/${BUNDLE} is missing: run npm run build first`);
  fs.rmSync(TMP, { recursive: true, force: true });
  snapshotService('startup.tmp/bundled');
  fs.rmSync(path.join(snapshotService('startup.tmp/unbundled'), 'dist', BUNDLE));
  fs.mkdirSync(path.join(TMP, 'cache'));
}

function configurations(closedPort) {
  const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closedPort}` };
  const all = { 'plain-http': { title: 'plain node:http', args: ['bench/baseline-http.cjs'], env: {} } };
  for (const [name, variant, title, env] of [
    ['service-off', 'bundled', 'service, OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true' }],
    ['unbundled', 'unbundled', 'tracing on, unbundled', tracing],
    ['bundled', 'bundled', 'tracing on, bundled', tracing],
  ]) {
    const service = { args: [path.join(TMP, variant, 'dist/main.js')], cwd: path.join(TMP, variant) };
    all[name] = { title, ...service, env: { ...env, NODE_DISABLE_COMPILE_CACHE: '1' } };
    all[`${name}+cache`] = { title: `${title}, compile cache warm`, ...service, env: { ...env, NODE_COMPILE_CACHE: path.join(TMP, 'cache', name) } };
  }
  return all;
}

async function once(name, config) {
  const server = await startServer(name, config);
  // CPU time (user + system, all threads) until healthy: steadier than the wall clock when the
  // machine is busy, but only in 10 ms ticks.
  const cpuMs = cpuMicros(server.pid) / 1000;
  await sleep(1000);
  const rss = rssMb(server.pid);
  const exit = await server.stop();
  if (exit.code !== 0) throw new Error(`${name} exited ${JSON.stringify(exit)}; see ${server.stderrPath}`);
  const stderr = fs.readFileSync(server.stderrPath, 'utf8');
  if (stderr.trim() !== '') throw new Error(`${name} wrote to stderr:\n${stderr.slice(0, 2000)}`);
  return { startupMs: server.startupMs, cpuMs, rssMb: rss };
}

async function main() {
  pinToLoadCore();
  prepare();
  const [closedPort] = await freePorts(1);
  const all = configurations(closedPort);
  const names = args.configs ? args.configs.split(',') : Object.keys(all);
  for (const name of names) if (!all[name]) throw new Error(`unknown configuration ${name}; known: ${Object.keys(all).join(', ')}`);
  // The harness's own settings must not leak into the servers (startServer passes process.env on).
  delete process.env.NODE_COMPILE_CACHE;
  delete process.env.NODE_DISABLE_COMPILE_CACHE;

  // One untimed start of each: fills the compile caches and the OS page cache alike.
  for (const name of names) await once(name, all[name]);

  const rounds = Number(args.rounds);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = 1; round <= rounds; round++) {
    const line = [];
    for (const name of names) {
      const s = await once(name, all[name]);
      samples[name].push(s);
      line.push(`${name} ${s.startupMs.toFixed(0)}`);
    }
    console.error(`round ${round}/${rounds}: ${line.join('  ')} ms`);
  }

  const plain = median((samples['plain-http'] ?? []).map((s) => s.startupMs));
  const plainCpu = median((samples['plain-http'] ?? []).map((s) => s.cpuMs));
  const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '–');
  const rows = [
    `Start-up (spawn → first 200 on /health), ${rounds} interleaved rounds, Node ${process.version}, ${PIN ? 'server on core 0, harness on core 1' : 'unpinned'}:`,
    '',
    '| configuration | median ms | min–max ms | × plain node:http | CPU ms to healthy (× plain) | idle RSS MB |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  for (const name of names) {
    const ms = samples[name].map((s) => s.startupMs);
    const m = median(ms);
    const cpu = median(samples[name].map((s) => s.cpuMs));
    rows.push(
      `| ${name}: ${all[name].title} | ${f(m)} | ${f(min(ms))}–${f(max(ms))} | ${f(m / plain, 1)} | ${f(cpu)} (${f(cpu / plainCpu, 1)}) | ${f(median(samples[name].map((s) => s.rssMb)))} |`,
    );
  }
  console.log(rows.join('\n'));
}

await main();
