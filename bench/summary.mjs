// From samples to the figures the tables show: medians over the rounds, CPU ratios computed per
// round (the same round ran under the same machine conditions) and then medianed, and the goals.
import { AGAINST, max, median, min } from './lib.mjs';

const BASE = 'plain-http';

function ratiosPerRound(samples, name, base) {
  const ratios = [];
  for (const s of samples.filter((x) => x.config === name)) {
    const b = samples.find((x) => x.config === base && x.round === s.round);
    if (b) ratios.push(s.cpuUsPerRequest / b.cpuUsPerRequest);
  }
  return ratios;
}

export function summarise(samples, names) {
  /** @type {Record<string, any>} */
  const summary = {};
  for (const name of names) {
    const mine = samples.filter((s) => s.config === name);
    const col = (k) => mine.map((s) => s[k]);
    const ratios = ratiosPerRound(samples, name, BASE);
    const medians = ['cpuUsPerRequest', 'rps', 'p50Ms', 'p99Ms', 'rssIdleMb', 'rssPeakMb', 'startupMs', 'spansPerRequest', 'otlpBytesPerRequest'];
    summary[name] = {
      rounds: mine.length,
      ...Object.fromEntries(medians.map((k) => [k, median(col(k))])),
      cpuUsPerRequestMin: min(col('cpuUsPerRequest')),
      cpuUsPerRequestMax: max(col('cpuUsPerRequest')),
      sysUsPerRequest: median(col('sysUs')),
      rssPeakMaxMb: max(col('rssPeakMb')),
      errors: col('errors').reduce((a, b) => a + b, 0),
      cpuRatio: median(ratios),
      cpuRatios: ratios,
    };
    if (name.endsWith(AGAINST)) {
      const toCurrent = ratiosPerRound(samples, name, name.slice(0, -AGAINST.length));
      summary[name].cpuRatioToCurrent = median(toCurrent);
      summary[name].cpuRatiosToCurrent = toCurrent;
    }
  }
  return summary;
}

/**
 * A fixed-rate row is valid when the machine cannot have set its p99: other processes made the
 * server's event-loop thread wait for a CPU at most MAX_WAIT_PCT of the window (a wait is a
 * scheduler slice, milliseconds, so beyond 1 % other work's slices reach the slowest 1 % of
 * requests; the server's own threads are the service's tail, not the machine's), and the load
 * generator sent its slowest 1 % at most MAX_LATE_MS after their intended times (its latency counts
 * from them). The generator's CPU wait alone says nothing: it spins between sends, so any task on
 * its core makes it wait without making it late.
 */
export const MAX_WAIT_PCT = 1;
export const MAX_LATE_MS = 1;
const validRow = (r) => (r.machineWaitPct ?? r.waitPct) <= MAX_WAIT_PCT && !(r.loadLateP99Ms > MAX_LATE_MS);

/** The rate at which the latency goals are judged: about half a core of the traced service. */
const GOAL_RATE = 1000;

/**
 * The fixed-rate rows by rate and configuration: medians over all rounds and over the valid ones,
 * and the floor, plain node:http's p99 at the same rate in the same round (both rows valid).
 */
export function rateSummary(rate, names) {
  const specs = [...new Set(rate.map((r) => r.spec))];
  return specs.flatMap((spec) =>
    names.flatMap((name) => {
      const rs = rate.filter((r) => r.spec === spec && r.config === name);
      if (!rs.length) return [];
      const valid = rs.filter(validRow);
      const m = (k, xs = rs) => median(xs.map((r) => r[k]));
      const floors = valid.map((r) => rate.find((b) => b.config === BASE && b.spec === spec && b.round === r.round)).filter((b) => b && validRow(b));
      const ratios = valid.flatMap((r) => floors.filter((b) => b.round === r.round).map((b) => r.p99Ms / b.p99Ms));
      return [
        {
          spec,
          config: name,
          rounds: rs.length,
          validRounds: valid.length,
          targetRps: m('targetRps'),
          rps: m('rps'),
          p50Ms: m('p50Ms', valid),
          p99Ms: m('p99Ms', valid),
          p99MsAll: m('p99Ms'),
          p999Ms: m('p999Ms', valid),
          maxMs: m('maxMs', valid),
          floorP99Ms: median(floors.map((b) => b.p99Ms)),
          p99RatioToPlain: median(ratios),
          cpuUsPerRequest: m('cpuUsPerRequest'),
          waitPct: m('waitPct'),
          waitPctMax: max(rs.map((r) => r.waitPct)),
          machineWaitPct: m('machineWaitPct'),
          loadLateP99Ms: m('loadLateP99Ms'),
          pressurePct: m('pressurePct'),
          errors: rs.reduce((a, r) => a + r.errors, 0),
          spansLost: rs.reduce((a, r) => a + (r.sdk ? r.sdk.dropped + r.sdk.exportFailed : 0), 0),
        },
      ];
    }),
  );
}

export function goals(summary, rate, startups) {
  const full = summary['service-full'];
  const off = summary['service-off'];
  const atGoalRate = rateSummary(rate, ['service-full']).find((r) => r.spec === GOAL_RATE);
  /** `unmeasured` says why there is no value (a fixed rate run, but no round of it valid). */
  const g = (goal, limit, value, unit, ok, unmeasured) => ({
    goal,
    limit,
    value,
    unit,
    unmeasured,
    met: value === undefined || Number.isNaN(value) ? null : ok,
  });
  const noValidRound = atGoalRate && atGoalRate.validRounds === 0 ? 'no valid round (the machine was the tail)' : undefined;
  // The start-up-only samples when there are any (more of them, no load before), else the rounds'.
  const startupOf = (name) => {
    const only = startups.filter((x) => x.config === name).map((x) => x.startupMs);
    return only.length ? median(only) : summary[name]?.startupMs;
  };
  const startupRatio = startupOf('service-full') / startupOf(BASE);
  const lost = atGoalRate && rateSummary(rate, ['service-full']).reduce((a, r) => a + r.spansLost, 0);
  return [
    g('full observability: CPU/request vs plain node:http', '≤ 7x (the brief; 6.77x before #38)', full?.cpuRatio, 'x', full?.cpuRatio <= 7),
    g('observability off: CPU/request vs plain node:http', '≤ 2.5x', off?.cpuRatio, 'x', off?.cpuRatio <= 2.5),
    g('RSS under full load (peak, worst round)', '≤ 200 MB', full?.rssPeakMaxMb, 'MB', full?.rssPeakMaxMb <= 200),
    g('start-up to first healthy /health, tracing on, vs plain node:http', '≤ 6x', startupRatio, 'x', startupRatio <= 6),
    g(
      `full observability at ${GOAL_RATE} req/s (about half a core): p99, valid rounds`,
      '≤ 5 ms',
      atGoalRate?.p99Ms,
      'ms',
      atGoalRate?.p99Ms <= 5,
      noValidRound,
    ),
    g(`… × plain node:http's p99 at ${GOAL_RATE} req/s, same round`, '≤ 3x', atGoalRate?.p99RatioToPlain, 'x', atGoalRate?.p99RatioToPlain <= 3, noValidRound),
    g('full observability: spans dropped or failed at the fixed rates', '0', lost, 'spans', lost === 0),
  ];
}
