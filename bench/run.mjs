// The benchmark harness of product-service. See bench/README.md for what it measures and why.
//
//   sh scripts/node.sh bench/run.mjs [--rounds 5] [--duration 10] [--warmup 3] [--connections 50]
//       [--configs plain-http,service-off,service-full,straightforward] [--rate-mode] [--rate N]
//       [--soak SECONDS [--soak-configs service-full]] [--startup N] [--node-args '--flag ...']
//       [--smoke] [--out DIR]
//
// Each configuration runs as its own process, started exactly as production starts it
// (compiled JS, `node dist/main.js`), pinned to core 0; the load
// generator, the OTLP sink and this harness are pinned to core 1. Configurations are
// interleaved (A B C D A B C D ...) over the rounds, because the machine is shared and noisy:
// only numbers measured in the same run are compared, and the ratios against plain node:http
// are computed per round, then medianed.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BENCH, ROOT, SERVICE, configurations, PIN, LOAD_CORE, SERVER_CORE, cpuMicros, rssMb, median, min, max,
  cpuSplit, machineInfo, snapshotService, startSink, startServer, logDir, wrkAvailable, closedLoad, openLoad, withRssSampling, scrapeSdkCounters, checkResponses,
} from './lib.mjs';

// ---------------------------------------------------------------------------------------------
// Options

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string' },
    duration: { type: 'string' }, // seconds of measured load per configuration and round
    warmup: { type: 'string' }, // seconds of load before the measured window (JIT, pools)
    idle: { type: 'string' }, // seconds to sit idle after start-up before reading idle RSS
    connections: { type: 'string' },
    configs: { type: 'string' },
    'rate-mode': { type: 'boolean' },
    rate: { type: 'string' }, // fixed rate (req/s) instead of half of each config's max
    'rate-rounds': { type: 'string' }, // rounds of the fixed-rate phase (default: --rounds)
    soak: { type: 'string' }, // seconds of sustained load for the RSS growth check
    'soak-configs': { type: 'string' },
    startup: { type: 'string' }, // extra start-up-only samples per configuration
    render: { type: 'string' }, // re-write the Markdown (and README) from an existing result JSON
    'node-args': { type: 'string' }, // extra node flags for the service configurations, e.g. V8 heap sizes
    smoke: { type: 'boolean' },
    out: { type: 'string' },
    help: { type: 'boolean' },
  },
});

if (args.help) {
  const usage = fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n').slice(2, 6);
  console.log(usage.map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}

const smoke = Boolean(args.smoke);
const opts = {
  rounds: Number(args.rounds ?? (smoke ? 1 : 5)),
  duration: Number(args.duration ?? (smoke ? 1 : 10)),
  warmup: Number(args.warmup ?? (smoke ? 0.5 : 3)),
  idle: Number(args.idle ?? (smoke ? 0.2 : 1)),
  connections: Number(args.connections ?? 50),
  rateMode: Boolean(args['rate-mode'] || smoke),
  rate: args.rate ? Number(args.rate) : undefined,
  rateRounds: Number(args['rate-rounds'] ?? (args.rounds === '0' ? 3 : (args.rounds ?? (smoke ? 1 : 5)))),
  soak: args.soak ? Number(args.soak) : 0,
  soakConfigs: (args['soak-configs'] ?? 'service-full').split(','),
  startup: Number(args.startup ?? 0),
  nodeArgs: args['node-args'] ? args['node-args'].split(' ').filter(Boolean) : [],
  configs: (args.configs ?? 'plain-http,service-off,service-full,straightforward').split(','),
  // The smoke run must not overwrite the committed results; *.tmp is gitignored.
  out: path.resolve(ROOT, args.out ?? (smoke ? 'bench/results/smoke.tmp' : 'bench/results')),
};


// ---------------------------------------------------------------------------------------------
// One measurement

/**
 * Starts `name`, waits, warms up, then measures a closed-loop window of `opts.duration` s:
 * server CPU (utime+stime delta) / requests completed in the window, throughput, latency,
 * RSS, and what reached the OTLP sink during the window.
 */
async function measureClosed(name, config, sink) {
  const server = await startServer(name, config);
  try {
    await sleep(opts.idle * 1000);
    const rssIdleMb = rssMb(server.pid);
    await checkResponses(name, server.port);
    if (opts.warmup > 0) await closedLoad(server.port, opts.warmup, opts.connections);
    const sinkBefore = await sink.stats();
    const cpuBefore = cpuSplit(server.pid);
    const { result: load, rssPeakMb, rssMedianMb } =
      await withRssSampling(server.pid, () => closedLoad(server.port, opts.duration, opts.connections));
    const cpuAfter = cpuSplit(server.pid);
    const userUs = cpuAfter.user - cpuBefore.user;
    const sysUs = cpuAfter.sys - cpuBefore.sys;
    // Spans finished in the window are exported up to the batch delay later: give the batch
    // processor its default 5 s schedule. A smoke run only needs to see some spans arrive.
    let sinkAfter = await sink.stats();
    if (config.traced) {
      const deadline = performance.now() + 5500;
      while (performance.now() < deadline && !(smoke && sinkAfter.traces.items > sinkBefore.traces.items)) {
        await sleep(100);
        sinkAfter = await sink.stats();
      }
    }
    const sdk = config.scrapeSdk ? await scrapeSdkCounters(server.metricsPort) : undefined;
    const spans = sinkAfter.traces.items - sinkBefore.traces.items;
    return {
      config: name,
      startupMs: server.startupMs,
      rssIdleMb,
      rssPeakMb,
      rssMedianMb,
      requests: load.requests,
      rps: load.rps,
      p50Ms: load.p50Ms,
      p99Ms: load.p99Ms,
      errors: load.errors,
      cpuUsPerRequest: (userUs + sysUs) / load.requests,
      // Kernel share of that CPU: socket reads and writes, mostly (see README: it grows when wrk waits).
      sysUs: sysUs / load.requests,
      // Spans per request counts spans that reached the sink from the window (incl. the last
      // batch after it); warm-up spans still queued at its start can push it slightly above.
      spansPerRequest: spans / load.requests,
      otlpBytesPerRequest: (sinkAfter.traces.bytes - sinkBefore.traces.bytes) / load.requests,
      otlpMetricsRequests: sinkAfter.metrics.requests - sinkBefore.metrics.requests,
      otlpLogRecords: sinkAfter.logs.items - sinkBefore.logs.items,
      sdk,
      exit: await server.stop(),
    };
  } finally {
    await server.stop();
  }
}

/** Fixed-rate (open loop) window: p50/p99 latency at `rate` req/s, measured from the intended send times. */
async function measureRate(name, config, rate) {
  const server = await startServer(name, config);
  try {
    await checkResponses(name, server.port);
    if (opts.warmup > 0) await closedLoad(server.port, opts.warmup, opts.connections);
    const cpuBefore = cpuMicros(server.pid);
    const r = await openLoad(server.port, opts.duration, Math.round(rate));
    const cpuAfter = cpuMicros(server.pid);
    return {
      config: name,
      targetRps: Math.round(rate),
      rps: r.rps,
      p50Ms: r.latency_ms.p50,
      p99Ms: r.latency_ms.p99,
      p999Ms: r.latency_ms.p999,
      maxMs: r.latency_ms.max,
      serviceP99Ms: r.service_ms.p99,
      errors: r.errors + r.non2xx,
      cpuUsPerRequest: (cpuAfter - cpuBefore) / r.requests,
      exit: await server.stop(),
    };
  } finally {
    await server.stop();
  }
}

/** Sustained load for `seconds` with an RSS sample every 5 s: the "no growth" goal. */
async function soak(name, config, seconds) {
  const server = await startServer(name, config);
  try {
    const t0 = performance.now();
    const timeline = [];
    const timer = setInterval(() => timeline.push({ s: Math.round((performance.now() - t0) / 1000), rssMb: rssMb(server.pid) }), 5000);
    const cpuBefore = cpuMicros(server.pid);
    const load = await closedLoad(server.port, seconds, opts.connections).finally(() => clearInterval(timer));
    const cpuAfter = cpuMicros(server.pid);
    const at = (s) => timeline.reduce((best, p) => (Math.abs(p.s - s) < Math.abs(best.s - s) ? p : best), timeline[0])?.rssMb;
    return {
      config: name, seconds, timeline, rps: load.rps, errors: load.errors,
      cpuUsPerRequest: (cpuAfter - cpuBefore) / load.requests,
      rssAt60sMb: at(60), rssAtEndMb: timeline.at(-1)?.rssMb, rssPeakMb: max(timeline.map((p) => p.rssMb)),
      exit: await server.stop(),
    };
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Summary, goals, output

const BASE = 'plain-http';

function summarise(samples, names) {
  /** @type {Record<string, any>} */
  const summary = {};
  for (const name of names) {
    const mine = samples.filter((s) => s.config === name);
    const col = (k) => mine.map((s) => s[k]);
    summary[name] = {
      rounds: mine.length,
      cpuUsPerRequest: median(col('cpuUsPerRequest')),
      cpuUsPerRequestMin: min(col('cpuUsPerRequest')),
      cpuUsPerRequestMax: max(col('cpuUsPerRequest')),
      sysUsPerRequest: median(col('sysUs')),
      rps: median(col('rps')),
      p50Ms: median(col('p50Ms')),
      p99Ms: median(col('p99Ms')),
      rssIdleMb: median(col('rssIdleMb')),
      rssPeakMb: median(col('rssPeakMb')),
      rssPeakMaxMb: max(col('rssPeakMb')),
      startupMs: median(col('startupMs')),
      spansPerRequest: median(col('spansPerRequest')),
      otlpBytesPerRequest: median(col('otlpBytesPerRequest')),
      errors: col('errors').reduce((a, b) => a + b, 0),
    };
    // Ratio per round (same round = same machine conditions), then the median of the ratios.
    const ratios = [];
    for (const s of mine) {
      const base = samples.find((b) => b.config === BASE && b.round === s.round);
      if (base) ratios.push(s.cpuUsPerRequest / base.cpuUsPerRequest);
    }
    summary[name].cpuRatio = median(ratios);
    summary[name].cpuRatios = ratios;
  }
  return summary;
}

function goals(summary, rate, soakResults, startups) {
  const full = summary['service-full'];
  const off = summary['service-off'];
  const rateFull = rate.filter((r) => r.config === 'service-full');
  const soakFull = soakResults.find((r) => r.config === 'service-full');
  const g = (goal, limit, value, unit, ok) => ({ goal, limit, value, unit, met: value === undefined || Number.isNaN(value) ? null : ok });
  // The start-up-only samples when there are any (more of them, no load before), else the rounds'.
  const startupOf = (name) => {
    const only = startups.filter((x) => x.config === name).map((x) => x.startupMs);
    return only.length ? median(only) : summary[name]?.startupMs;
  };
  const startupRatio = startupOf('service-full') / startupOf(BASE);
  return [
    g('full observability: CPU/request vs plain node:http', '≤ 4.5x', full?.cpuRatio, 'x', full?.cpuRatio <= 4.5),
    g('observability off: CPU/request vs plain node:http', '≤ 2.5x', off?.cpuRatio, 'x', off?.cpuRatio <= 2.5),
    g('RSS under full load (peak, worst round)', '≤ 200 MB', full?.rssPeakMaxMb, 'MB', full?.rssPeakMaxMb <= 200),
    g('RSS growth, minute 1 → end of soak', 'none (≤ 5 %)',
      soakFull ? soakFull.rssAtEndMb - soakFull.rssAt60sMb : undefined, 'MB',
      soakFull ? soakFull.rssAtEndMb <= soakFull.rssAt60sMb * 1.05 : null),
    g('start-up to first healthy /health, tracing on, vs plain node:http', '≤ 8x', startupRatio, 'x', startupRatio <= 8),
    g('p99 latency at half the max throughput', '< 5 ms', rateFull.length ? median(rateFull.map((r) => r.p99Ms)) : undefined, 'ms',
      median(rateFull.map((r) => r.p99Ms)) < 5),
  ];
}

/**
 * The hand-made tracing that NodeSDK + auto-instrumentations replaced, measured by this harness
 * before it was deleted (bench/results/handmade-tracing.json): one row, for what the standard stack costs.
 */
function handmadeRow() {
  const file = path.join(BENCH, 'results/handmade-tracing.json');
  if (!fs.existsSync(file)) return undefined;
  const before = JSON.parse(fs.readFileSync(file, 'utf8'));
  const s = before.summary['service-full'];
  const startupOnly = (name) => median(before.startups.filter((x) => x.config === name).map((x) => x.startupMs));
  return { date: before.meta.date, s, startupRatio: startupOnly('service-full') / startupOnly(BASE) };
}

function machine() {
  return {
    ...machineInfo(`server on core ${SERVER_CORE}; load, sink, harness on core ${LOAD_CORE}`),
    loadGenerator: wrkAvailable() ? execFileSync('sh', ['-c', 'wrk --version 2>&1 | head -1 || true']).toString().trim() : 'autocannon',
  };
}

const f = (x, d = 1) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '–');

function markdown(result) {
  const { meta, summary, rate, soak: soakResults, startups, goals: goalRows } = result;
  const lines = [];
  lines.push(`Measured ${meta.date} on ${meta.machine.nproc} × ${meta.machine.cpu}, ${meta.machine.memGb} GiB, Linux ${meta.machine.kernel}, Node ${meta.machine.node}, ${meta.machine.loadGenerator}.`);
  lines.push(`Command: \`${meta.command}\` (${meta.options.rounds} rounds × ${meta.options.duration} s, ${meta.options.connections} connections, ${meta.options.warmup} s warm-up; ${meta.machine.pinned}).`);
  lines.push('');
  if (meta.configs.some((name) => summary[name]?.rounds > 0)) {
    lines.push('| configuration | CPU µs/request (min–max) | of which kernel | × plain node:http | req/s | p50 ms | p99 ms | RSS idle MB | RSS load MB | start-up ms | spans/req | OTLP B/req | errors |');
    lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const name of meta.configs) {
      const s = summary[name];
      if (!s?.rounds) continue;
      lines.push(`| ${name} | ${f(s.cpuUsPerRequest)} (${f(s.cpuUsPerRequestMin)}–${f(s.cpuUsPerRequestMax)}) | ${f(s.sysUsPerRequest)} | ${f(s.cpuRatio, 2)} | ${f(s.rps, 0)} | ${f(s.p50Ms, 2)} | ${f(s.p99Ms, 2)} | ${f(s.rssIdleMb, 0)} | ${f(s.rssPeakMb, 0)} | ${f(s.startupMs, 0)} | ${f(s.spansPerRequest, 2)} | ${f(s.otlpBytesPerRequest, 0)} | ${s.errors} |`);
    }
    const before = handmadeRow();
    if (before) {
      const { s } = before;
      lines.push(`| service-full, hand-made tracing before sdk-node (run of ${before.date.slice(0, 10)}, start-up ${f(before.startupRatio, 1)}x plain) | ${f(s.cpuUsPerRequest)} (${f(s.cpuUsPerRequestMin)}–${f(s.cpuUsPerRequestMax)}) | ${f(s.sysUsPerRequest)} | ${f(s.cpuRatio, 2)} | ${f(s.rps, 0)} | ${f(s.p50Ms, 2)} | ${f(s.p99Ms, 2)} | ${f(s.rssIdleMb, 0)} | ${f(s.rssPeakMb, 0)} | ${f(s.startupMs, 0)} | ${f(s.spansPerRequest, 2)} | ${f(s.otlpBytesPerRequest, 0)} | ${s.errors} |`);
    }
    lines.push('');
    lines.push('Medians over the rounds. "× plain node:http" is the CPU-per-request ratio against plain node:http in the same round, medianed over the rounds. CPU = utime+stime of the server process (all threads) over the measured window ÷ requests completed in it; "of which kernel" is the stime part. Closed loop (wrk, POST /product); latencies at saturation. RSS load = peak VmRSS sampled every 100 ms in the window.');
  }
  if (rate.length) {
    lines.push('');
    lines.push(`Fixed rate (open loop, bench/load-open.mjs, 64 keep-alive connections, latency from the intended send time), at ${meta.options.rate ? `${meta.options.rate} req/s` : "half of each configuration's median closed-loop throughput"}; medians over the rounds:`);
    lines.push('');
    lines.push('| configuration | target req/s | achieved req/s | p50 ms | p99 ms | p99 ms, best round | p99.9 ms | max ms | CPU µs/request | errors |');
    lines.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const name of meta.configs) {
      const rs = rate.filter((r) => r.config === name);
      if (!rs.length) continue;
      const m = (k) => median(rs.map((r) => r[k]));
      lines.push(`| ${name} | ${f(m('targetRps'), 0)} | ${f(m('rps'), 0)} | ${f(m('p50Ms'), 2)} | ${f(m('p99Ms'), 2)} | ${f(min(rs.map((r) => r.p99Ms)), 2)} | ${f(m('p999Ms'), 2)} | ${f(m('maxMs'), 1)} | ${f(m('cpuUsPerRequest'))} | ${rs.reduce((a, r) => a + r.errors, 0)} |`);
    }
  }
  if (startups.length) {
    lines.push('');
    lines.push(`Start-up only (spawn → first 200 on /health, ${meta.options.startup} interleaved samples per configuration, no load):`);
    lines.push('');
    lines.push('| configuration | median ms | min ms | max ms |');
    lines.push('|---|---|---|---|');
    for (const name of meta.configs) {
      const xs = startups.filter((x) => x.config === name).map((x) => x.startupMs);
      lines.push(`| ${name} | ${f(median(xs), 0)} | ${f(min(xs), 0)} | ${f(max(xs), 0)} |`);
    }
  }
  if (soakResults.length) {
    lines.push('');
    lines.push('| soak | seconds | req/s | CPU µs/request | RSS at 60 s MB | RSS at end MB | RSS peak MB |');
    lines.push('|---|---|---|---|---|---|---|');
    for (const s of soakResults) lines.push(`| ${s.config} | ${s.seconds} | ${f(s.rps, 0)} | ${f(s.cpuUsPerRequest)} | ${f(s.rssAt60sMb, 0)} | ${f(s.rssAtEndMb, 0)} | ${f(s.rssPeakMb, 0)} |`);
  }
  lines.push('');
  lines.push('| goal | limit | measured | met |');
  lines.push('|---|---|---|---|');
  for (const g of goalRows) lines.push(`| ${g.goal} | ${g.limit} | ${g.value === undefined || Number.isNaN(g.value) ? 'not measured' : `${f(g.value, 2)} ${g.unit}`} | ${g.met === null ? '–' : g.met ? 'yes' : 'no'} |`);
  return lines.join('\n') + '\n';
}

/** Replaces the table between the markers in bench/README.md. */
function updateReadme(md) {
  const readme = path.join(BENCH, 'README.md');
  if (!fs.existsSync(readme)) return;
  const text = fs.readFileSync(readme, 'utf8');
  const start = '<!-- bench:latest:start -->';
  const end = '<!-- bench:latest:end -->';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < i) return;
  fs.writeFileSync(readme, text.slice(0, i + start.length) + '\n' + md + text.slice(j));
}

// ---------------------------------------------------------------------------------------------
// Main

/** --render: the Markdown again from a result JSON (after a change to the tables' format). */
function render(file) {
  const result = JSON.parse(fs.readFileSync(path.resolve(file), 'utf8'));
  result.startups ??= [];
  result.goals = goals(result.summary, result.rate, result.soak, result.startups);
  const md = markdown(result);
  fs.writeFileSync(path.join(path.dirname(path.resolve(file)), 'latest.md'), md);
  if (path.resolve(file) === path.join(BENCH, 'results/latest.json')) updateReadme(md);
  console.log(md);
}

async function main() {
  if (args.render) return render(args.render);
  const started = new Date();
  if (PIN) execFileSync('taskset', ['-a', '-p', '-c', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  const usesService = opts.configs.some((n) => ['service-off', 'service-full'].includes(n));
  if (usesService && !fs.existsSync(path.join(ROOT, 'dist/main.js'))) {
    throw new Error('dist/main.js is missing: run `npm run build` first');
  }
  const serviceDir = usesService ? snapshotService() : ROOT;
  const sink = await startSink();
  const all = configurations(sink.port, serviceDir);
  for (const config of Object.values(all)) if (config.args === SERVICE) config.nodeArgs = opts.nodeArgs;
  for (const name of opts.configs) {
    if (!all[name]) throw new Error(`unknown configuration ${name}; known: ${Object.keys(all).join(', ')}`);
  }
  const problems = [];
  const note = (msg) => { problems.push(msg); console.error(`PROBLEM: ${msg}`); };
  const samples = [];
  const rate = [];
  const soakResults = [];
  const startups = [];
  try {
    // Start-up only: spawn → first healthy /health → SIGTERM, interleaved, no load.
    for (let i = 0; i < opts.startup; i++) {
      for (const name of opts.configs) {
        try {
          const server = await startServer(name, all[name]);
          const exit = await server.stop();
          startups.push({ config: name, startupMs: server.startupMs });
          if (exit.code !== 0) note(`${name} start-up sample ${i + 1}: exit ${JSON.stringify(exit)} after SIGTERM`);
        } catch (err) {
          note(`${name} start-up sample ${i + 1} failed: ${err.message}`);
        }
      }
    }
    for (let round = 1; round <= opts.rounds; round++) {
      for (const name of opts.configs) {
        let s;
        try {
          s = { round, ...(await measureClosed(name, all[name], sink)) };
        } catch (err) {
          note(`${name} round ${round} failed: ${err.message}`);
          continue;
        }
        samples.push(s);
        console.error(`round ${round} ${name.padEnd(16)} ${f(s.cpuUsPerRequest).padStart(6)} µs/req ${f(s.rps, 0).padStart(6)} req/s  p99 ${f(s.p99Ms, 2)} ms  RSS ${f(s.rssPeakMb, 0)} MB  start-up ${f(s.startupMs, 0)} ms  spans/req ${f(s.spansPerRequest, 2)}`);
        if (s.errors > 0) note(`${name} round ${round}: ${s.errors} failed requests`);
        if (!(s.requests > 0)) note(`${name} round ${round}: no request completed`);
        if (all[name].traced && !(s.spansPerRequest > 0)) note(`${name} round ${round}: no span reached the OTLP sink`);
        if (s.sdk && (s.sdk.dropped > 0 || s.sdk.exportFailed > 0)) note(`${name} round ${round}: ${s.sdk.dropped} spans dropped, ${s.sdk.exportFailed} failed to export`);
        if (s.exit.code !== 0) note(`${name} round ${round}: exit ${JSON.stringify(s.exit)} after SIGTERM (see ${path.relative(ROOT, logDir)})`);
      }
    }
    const summary = summarise(samples, opts.configs);
    if (opts.rateMode) {
      if (!opts.rate && samples.length === 0) throw new Error('--rate-mode without closed-loop rounds needs --rate N');
      for (let round = 1; round <= opts.rateRounds; round++) {
        for (const name of opts.configs) {
          const target = opts.rate ?? summary[name].rps / 2;
          let r;
          try {
            r = { round, ...(await measureRate(name, all[name], target)) };
          } catch (err) {
            note(`${name} fixed-rate round ${round} failed: ${err.message}`);
            continue;
          }
          rate.push(r);
          console.error(`rate  ${round} ${name.padEnd(16)} ${f(r.rps, 0)}/${r.targetRps} req/s  p50 ${f(r.p50Ms, 2)} ms  p99 ${f(r.p99Ms, 2)} ms`);
          if (r.errors > 0) note(`${name} fixed-rate round ${round}: ${r.errors} failed requests`);
        }
      }
    }
    if (opts.soak > 0) {
      for (const name of opts.soakConfigs) {
        let s;
        try {
          s = await soak(name, all[name], opts.soak);
        } catch (err) {
          note(`${name} soak failed: ${err.message}`);
          continue;
        }
        soakResults.push(s);
        console.error(`soak  ${name} ${s.seconds} s: RSS ${f(s.rssAt60sMb, 0)} MB at 60 s, ${f(s.rssAtEndMb, 0)} MB at end`);
        if (s.errors > 0) note(`${name} soak: ${s.errors} failed requests`);
        if (s.exit.code !== 0) note(`${name} soak: exit ${JSON.stringify(s.exit)} after SIGTERM`);
      }
    }
    const result = {
      meta: {
        date: started.toISOString(),
        machine: machine(),
        command: `sh scripts/node.sh bench/run.mjs ${process.argv.slice(2).join(' ')}`.trim(),
        // The output directory relative to the repository: results name no path of the machine.
        options: { ...opts, out: path.relative(ROOT, opts.out) },
        configs: opts.configs,
        titles: Object.fromEntries(opts.configs.map((n) => [n, all[n].title])),
        ratioMethod: 'per round: cpuUsPerRequest(config) / cpuUsPerRequest(plain-http), then median over rounds',
        stdout: 'servers write stdout to /dev/null (a file descriptor opened by the harness, not a pipe)',
        service: usesService ? `dist/ and package.json copied to ${path.relative(ROOT, serviceDir)} at the start of the run` : undefined,
      },
      summary,
      goals: [],
      samples,
      rate,
      soak: soakResults,
      startups,
      problems,
    };
    result.goals = goals(summary, rate, soakResults, startups);
    const md = markdown(result);
    fs.mkdirSync(opts.out, { recursive: true });
    fs.writeFileSync(path.join(opts.out, 'latest.json'), JSON.stringify(result, null, 2) + '\n');
    fs.writeFileSync(path.join(opts.out, 'latest.md'), md);
    if (!smoke && !args.out) updateReadme(md);
    console.log(md);
    console.error(`wrote ${path.relative(ROOT, path.join(opts.out, 'latest.json'))} and latest.md`);
  } finally {
    sink.stop();
  }
  if (problems.length) {
    console.error(`${problems.length} problem(s); the numbers above may not mean what they say.`);
    process.exitCode = 1;
  }
}

await main();
