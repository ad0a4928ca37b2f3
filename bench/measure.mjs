// One measurement of one configuration, on a server process of its own. See bench/README.md,
// "How it measures", for the steps and why they are taken.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  checkResponses,
  closedLoad,
  cpuMicros,
  cpuPressureUs,
  cpuSplit,
  openLoad,
  rssMb,
  scrapeSdkCounters,
  startServer,
  schedTimes,
  withRssSampling,
} from './lib.mjs';

async function withServer(name, config, measure) {
  const server = await startServer(name, config);
  let sample;
  try {
    sample = await measure(server);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return { ...sample, exit: await server.stop() };
}

export function startupOnly(name, config) {
  return withServer(name, config, (server) => ({ config: name, startupMs: server.startupMs }));
}

/**
 * @param {{idle: number, warmup: number, duration: number, connections: number, smoke: boolean}} opts
 */
export function measureClosed(name, config, sink, opts) {
  return withServer(name, config, async (server) => {
    await sleep(opts.idle * 1000);
    const rssIdleMb = rssMb(server.pid);
    await checkResponses(name, server.port);
    if (opts.warmup > 0) await closedLoad(server.port, opts.warmup, opts.connections);
    const sinkBefore = await sink.stats();
    const cpuBefore = cpuSplit(server.pid);
    const { result: load, rssPeakMb } = await withRssSampling(server.pid, () => closedLoad(server.port, opts.duration, opts.connections));
    const cpuAfter = cpuSplit(server.pid);
    const userUs = cpuAfter.user - cpuBefore.user;
    const sysUs = cpuAfter.sys - cpuBefore.sys;
    // Spans finished in the window are exported up to the batch delay later: 5.5 s covers the
    // SDK's own 5 s delay (the service's is 1 s), so that an A/B run against it counts every span.
    // A smoke run only needs to see some spans arrive.
    let sinkAfter = await sink.stats();
    if (config.traced) {
      const deadline = performance.now() + 5500;
      while (performance.now() < deadline && !(opts.smoke && sinkAfter.traces.items > sinkBefore.traces.items)) {
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
      ...load, // requests, rps, p50Ms, p99Ms, errors
      cpuUsPerRequest: (userUs + sysUs) / load.requests,
      // The kernel's share of that CPU: socket reads and writes, mostly (it grows when wrk waits).
      sysUs: sysUs / load.requests,
      // Spans that reached the sink from the window (and its last batch after it); warm-up spans
      // still queued at its start can push it slightly above one per request.
      spansPerRequest: spans / load.requests,
      otlpBytesPerRequest: (sinkAfter.traces.bytes - sinkBefore.traces.bytes) / load.requests,
      sdk,
    };
  });
}

/**
 * One fixed-rate window, with what tells the service's tail from the machine's: how long the server's
 * event-loop thread waited for a CPU (and how much of that other processes caused), how late the
 * load generator sent, and how long any task of the machine waited (PSI), as shares of the window.
 * @param {{warmup: number, rateWarmup: number, duration: number, connections: number}} opts
 */
export function measureRate(name, config, rate, opts) {
  return withServer(name, config, async (server) => {
    await checkResponses(name, server.port);
    if (opts.warmup > 0) await closedLoad(server.port, opts.warmup, opts.connections);
    if (opts.rateWarmup > 0) await openLoad(server.port, opts.rateWarmup, Math.round(rate));
    const before = { cpu: cpuMicros(server.pid), sched: schedTimes(server.pid), pressureUs: cpuPressureUs(), at: performance.now() };
    const r = await openLoad(server.port, opts.duration, Math.round(rate));
    const windowUs = (performance.now() - before.at) * 1000;
    const sched = schedTimes(server.pid);
    const waitNs = sched.mainWaitNs - before.sched.mainWaitNs;
    const othersNs = sched.othersRunNs - before.sched.othersRunNs;
    const pressureUs = cpuPressureUs() - before.pressureUs;
    const cpuAfter = cpuMicros(server.pid);
    return {
      config: name,
      targetRps: Math.round(rate),
      rps: r.rps,
      p50Ms: r.latency_ms.p50,
      p99Ms: r.latency_ms.p99,
      p999Ms: r.latency_ms.p999,
      maxMs: r.latency_ms.max,
      errors: r.errors + r.non2xx,
      cpuUsPerRequest: (cpuAfter - before.cpu) / r.requests,
      waitPct: (waitNs / 1000 / windowUs) * 100,
      // The part of that wait other processes caused (at least): the machine's, not the service's.
      machineWaitPct: (Math.max(0, waitNs - othersNs) / 1000 / windowUs) * 100,
      loadLateP99Ms: r.late_ms.p99,
      pressurePct: (pressureUs / windowUs) * 100,
      sdk: config.scrapeSdk ? await scrapeSdkCounters(server.metricsPort) : undefined,
    };
  });
}
