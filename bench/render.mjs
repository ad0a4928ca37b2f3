// The Markdown of a result: the tables bench/results/latest.md holds and docs/performance.md
// shows, rendered from the result JSON alone.
import { AGAINST, max, median, min } from './lib.mjs';
import { MAX_LATE_MS, MAX_WAIT_PCT, rateSummary } from './summary.mjs';

export const f = (x, d = 1) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '–');

const row = (cells) => `| ${cells.join(' | ')} |`;
const header = (cells) => [row(cells), `|${cells.map(() => '---').join('|')}|`];

const closedCells = (s) => [
  `${f(s.cpuUsPerRequest)} (${f(s.cpuUsPerRequestMin)}–${f(s.cpuUsPerRequestMax)})`,
  f(s.sysUsPerRequest),
  f(s.cpuRatio, 2),
  f(s.rps, 0),
  f(s.p50Ms, 2),
  f(s.p99Ms, 2),
  f(s.rssIdleMb, 0),
  f(s.rssPeakMb, 0),
  f(s.startupMs, 0),
  f(s.spansPerRequest, 2),
  f(s.otlpBytesPerRequest, 0),
  s.errors,
];

function closedTable({ meta, summary }) {
  // The "× current build" column only when the run compared two builds (--against).
  const ab = meta.configs.some((name) => name.endsWith(AGAINST));
  const lines = header([
    'configuration',
    'CPU µs/request (min–max)',
    'of which kernel',
    '× plain node:http',
    ...(ab ? ['× current build'] : []),
    'req/s',
    'p50 ms',
    'p99 ms',
    'RSS idle MB',
    'RSS load MB',
    'start-up ms',
    'spans/req',
    'OTLP B/req',
    'errors',
  ]);
  const cells = (label, s) => {
    const c = closedCells(s);
    return row([label, ...c.slice(0, 3), ...(ab ? [f(s.cpuRatioToCurrent, 2)] : []), ...c.slice(3)]);
  };
  for (const name of meta.configs) if (summary[name]?.rounds) lines.push(cells(name, summary[name]));
  lines.push('');
  lines.push(
    'Medians over the rounds. "× plain node:http" is the CPU-per-request ratio against plain node:http in the same round, medianed over the rounds. CPU = utime+stime of the server process (all threads) over the measured window ÷ requests completed in it; "of which kernel" is the stime part. Closed loop (wrk, POST /product); latencies at saturation. RSS load = peak VmRSS sampled every 100 ms in the window.',
  );
  if (ab) lines.push(`"× current build": the same ratio against the same configuration of the current build; \`…${AGAINST}\` = ${meta.against}.`);
  return lines;
}

function rateTable({ meta, rate }) {
  const lines = [
    `Fixed rates (open loop, bench/load-open.mjs, 64 keep-alive connections, latency from the intended send time): ${meta.options.rates.map((x) => `${x} req/s`).join(', ')}${meta.options.rateWarmup ? `, each window after ${meta.options.rateWarmup} s at that rate` : ''}. A round is valid when other processes made the server's event-loop thread wait for a CPU at most ${MAX_WAIT_PCT} % of the window (schedstat; its wait minus its other threads' run time, as it is pinned to one core) and the load generator sent its slowest 1 % at most ${MAX_LATE_MS} ms late (bench/README.md, "How it measures"); latencies are medians over the valid rounds, "–" when none was. Floor: plain node:http's p99 at the same rate in the same round.`,
    '',
    ...header([
      'rate',
      'configuration',
      'achieved req/s',
      'valid rounds',
      'p50 ms',
      'p99 ms',
      'floor p99 ms',
      '× floor',
      'p99 ms, all rounds',
      'p99.9 ms',
      'max ms',
      'CPU µs/request',
      'server thread CPU wait % (max)',
      'of which other processes %',
      'load generator late p99 ms',
      'machine CPU pressure %',
      'spans lost',
      'errors',
    ]),
  ];
  for (const r of rateSummary(rate, meta.configs)) {
    lines.push(
      row([
        String(r.spec),
        r.config,
        f(r.rps, 0),
        `${r.validRounds}/${r.rounds}`,
        f(r.p50Ms, 2),
        f(r.p99Ms, 2),
        f(r.floorP99Ms, 2),
        f(r.p99RatioToPlain, 2),
        f(r.p99MsAll, 2),
        f(r.p999Ms, 2),
        f(r.maxMs, 1),
        f(r.cpuUsPerRequest),
        `${f(r.waitPct, 2)} (${f(r.waitPctMax, 2)})`,
        f(r.machineWaitPct, 2),
        f(r.loadLateP99Ms, 2),
        f(r.pressurePct, 1),
        r.spansLost,
        r.errors,
      ]),
    );
  }
  return lines;
}

function startupTable({ meta, startups }) {
  const lines = [
    `Start-up only (spawn → first 200 on /health, ${meta.options.startup} interleaved samples per configuration, no load):`,
    '',
    ...header(['configuration', 'median ms', 'min ms', 'max ms']),
  ];
  for (const name of meta.configs) {
    const xs = startups.filter((x) => x.config === name).map((x) => x.startupMs);
    lines.push(row([name, f(median(xs), 0), f(min(xs), 0), f(max(xs), 0)]));
  }
  return lines;
}

function goalTable({ goals }) {
  const lines = header(['goal', 'limit', 'measured', 'met']);
  for (const g of goals) {
    const measured = g.value === undefined || Number.isNaN(g.value) ? (g.unmeasured ?? 'not measured') : `${f(g.value, 2)} ${g.unit}`;
    lines.push(row([g.goal, g.limit, measured, g.met === null ? '–' : g.met ? 'yes' : 'no']));
  }
  return lines;
}

export function markdown(result) {
  const { meta, summary, rate, startups } = result;
  const m = meta.machine;
  const o = meta.options;
  const sections = [
    [
      `Measured ${meta.date} on ${m.nproc} × ${m.cpu}, ${m.memGb} GiB, Linux ${m.kernel}, Node ${m.node}, ${m.loadGenerator}.`,
      `Command: \`${meta.command}\` (${o.rounds} rounds × ${o.duration} s, ${o.connections} connections, ${o.warmup} s warm-up; ${m.pinned}).`,
    ],
  ];
  if (meta.configs.some((name) => summary[name]?.rounds > 0)) sections.push(closedTable(result));
  if (rate.length) sections.push(rateTable(result));
  if (startups.length) sections.push(startupTable(result));
  sections.push(goalTable(result));
  return sections.map((lines) => lines.join('\n')).join('\n\n') + '\n';
}
