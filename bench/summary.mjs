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

export function goals(summary, rate, soakResults, startups) {
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
    g(
      'RSS growth, minute 1 → end of soak',
      'none (≤ 5 %)',
      soakFull ? soakFull.rssAtEndMb - soakFull.rssAt60sMb : undefined,
      'MB',
      soakFull ? soakFull.rssAtEndMb <= soakFull.rssAt60sMb * 1.05 : null,
    ),
    g('start-up to first healthy /health, tracing on, vs plain node:http', '≤ 8x', startupRatio, 'x', startupRatio <= 8),
    g(
      'p99 latency at half the max throughput',
      '< 5 ms',
      rateFull.length ? median(rateFull.map((r) => r.p99Ms)) : undefined,
      'ms',
      median(rateFull.map((r) => r.p99Ms)) < 5,
    ),
  ];
}
