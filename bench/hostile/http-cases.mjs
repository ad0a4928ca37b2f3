// The hostile run's classes 3-5, 12 and 13: clients that speak broken, abusive or half-finished HTTP. Each
// class gets a context (ctx.start starts a service of its own, harness.mjs) and returns table rows
// {sent, got, failures, rssMb?, details?}.
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpuMicros, freePorts, max, metricSum, request, rssMb, withRssSampling } from '../lib.mjs';
import { chunkedUpload, connected, parseResponses, rawExchange, settleOnce } from './clients.mjs';
import { MB, countsText, health, runWorker, startHealthProbe, statusText, tally } from './harness.mjs';

/**
 * 3. Clients that pipeline without ever reading: the answers would pile up in the server's memory.
 * First 40 connections that stay, then 40 that reconnect at once whenever the server closes them:
 * a connection-rate flood, which no setting inside one process absorbs (the ingress's connection
 * limits do), recorded to show where that limit is.
 */
export async function pipeliningFlood(ctx) {
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
      // The reconnecting flood's probes are recorded, not judged (see above).
      failures: [
        ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
        ...(reconnect || h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
      ],
      rssMb: peak,
      details: { flood, health: h },
    });
  }
  return rows;
}

/**
 * Connections each port holds (MAX_CONNECTIONS' default, METRICS_MAX_CONNECTIONS): classes 4 and 12
 * stay under them, with room for the probes, and class 13 goes past them.
 */
const CAP = { api: 2048, metrics: 64 };

/** 4. Connections held open for free, as many as the cap leaves room for: 500 trickling their headers, 1,400 saying nothing. */
export const slowlorisAndIdle = (ctx) => slowlorisOn(ctx, 'api', 500, 1400);

/** 250 at a time: a burst of thousands of SYNs overflows the accept backlog and costs 1 s retries. */
async function openMany(port, n, first, from) {
  const all = [];
  for (let i = 0; i < n; i += 250) {
    const batch = Array.from({ length: Math.min(250, n - i) }, () => {
      const c = { socket: net.connect(port, '127.0.0.1'), answer: '', closedAfterS: NaN, since: from ?? performance.now() };
      c.socket.on('data', (d) => (c.answer += d.toString('latin1')));
      c.socket.on('error', () => {});
      c.socket.on('close', () => (c.closedAfterS = (performance.now() - c.since) / 1000));
      return c;
    });
    await Promise.all(batch.map((c) => connected(c.socket)));
    if (first) for (const c of batch) c.socket.write(first);
    all.push(...batch);
  }
  return all;
}

const firstStatus = (c) => (c.answer ? (parseResponses(c.answer)[0]?.status ?? 'garbled') : 'none');

/**
 * `tricklers` connections trickling the headers of a request to `port` ('api' or 'metrics') and
 * `idlers` saying nothing, while /health on the API port is probed: all must be cut off with 408.
 */
async function slowlorisOn(ctx, port, tricklers, idlers) {
  const svc = await ctx.start(`slowloris-${port}`);
  const target = port === 'api' ? svc.port : svc.metricsPort;
  const t0 = performance.now();
  const probe = startHealthProbe(svc.port);
  const header = `GET ${port === 'api' ? '/health' : '/metrics'} HTTP/1.1\r\nHost: localhost\r\nX-Slow: ${'a'.repeat(100)}`;
  const trickling = await openMany(target, tricklers, header[0]);
  let sentBytes = 0;
  const trickle = setInterval(() => {
    sentBytes++;
    for (const c of trickling) if (!c.socket.destroyed) c.socket.write(header[Math.min(sentBytes, header.length - 1)]);
  }, 1000);
  const idle = await openMany(target, idlers);
  const openedS = (performance.now() - t0) / 1000;
  // headersTimeout is 10 s and Node checks it every 5 s: everything should be cut off by ~15 s.
  const deadline = t0 + 17_000;
  while (performance.now() < deadline && [...trickling, ...idle].some((c) => !c.socket.destroyed)) await sleep(250);
  clearInterval(trickle);
  const h = await probe.stop();
  const summary = (conns) => {
    const closed = conns.filter((c) => Number.isFinite(c.closedAfterS));
    const times = closed.map((c) => c.closedAfterS);
    return { closed: closed.length, statuses: tally(closed.map(firstStatus)), closedAfterS: { min: Math.min(...times), max: max(times) } };
  };
  const t = summary(trickling);
  const i = summary(idle);
  for (const c of [...trickling, ...idle]) c.socket.destroy();
  const span = (s) => (s.closed ? `after ${s.closedAfterS.min.toFixed(0)}–${s.closedAfterS.max.toFixed(0)} s` : '');
  const peak = svc.peakRssMb();
  return [
    {
      sent: `${tricklers} connections trickling headers 1 byte/s + ${idlers} idle connections (all open in ${openedS.toFixed(1)} s), watched ${((performance.now() - t0) / 1000).toFixed(0)} s`,
      got: `trickling: ${t.closed}/${tricklers} closed ${span(t)} (${countsText(t.statuses) || 'none'}); idle: ${i.closed}/${idlers} closed ${span(i)} (${countsText(i.statuses) || 'none'}); ${health(h)}`,
      failures: [
        ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
        ...(t.closed === tricklers && t.statuses[408] === tricklers ? [] : ['not every trickling connection got 408']),
        ...(i.closed === idlers && i.statuses[408] === idlers ? [] : [`not every idle connection got 408`]),
        ...(peak < 300 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 300 MB`]),
      ],
      details: { trickling: t, idle: i, health: h },
    },
  ];
}

/** 5. Bodies over BODY_LIMIT (1 MB): refused early, never buffered, and the refusal reaches the client. */
export async function oversizedBodies(ctx) {
  const rows = [];

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
      failures: [...(continued === 0 ? [] : [`${continued} were asked for the body`]), ...(refused === 50 ? [] : [`${50 - refused} got no 413`])],
      rssMb: svc.peakRssMb(),
    });
  }
  return rows;
}

/**
 * 12. The metrics port: whatever reaches it (every pod of the cluster, without a NetworkPolicy)
 * can send what a client of the API can. One connection pipelining scrapes without reading, a
 * flood of concurrent scrapes, and slowloris, each while /health is probed on the API port.
 */
export async function metricsPortAttacks(ctx) {
  return [await pipelinedScrapes(ctx), await scrapeFlood(ctx), ...(await slowlorisOn(ctx, 'metrics', 20, 40))];
}

/** 1,000 `GET /metrics` in one write on one connection that never reads: closed past the pipelining bound. */
async function pipelinedScrapes(ctx) {
  const svc = await ctx.start('metrics-pipelined');
  await request(svc.metricsPort, 'GET', '/metrics'); // as Prometheus would have: the first render warms the code up
  const probe = startHealthProbe(svc.port);
  await sleep(500);
  const socket = net.connect(svc.metricsPort, '127.0.0.1');
  socket.pause(); // before connecting: not a byte of the answers is read until the server is done
  socket.on('error', () => {});
  await connected(socket);
  const cpuBefore = cpuMicros(svc.pid);
  const t0 = performance.now();
  socket.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(1000));
  // The service says at warn that it closed a connection for pipelining; log lines reach stdout within 250 ms.
  let closedMs = NaN;
  while (performance.now() - t0 < 5000 && !Number.isFinite(closedMs)) {
    if (svc.logLines().some((line) => line.level === 'warn' && /pipelined/.test(line.detail ?? ''))) closedMs = performance.now() - t0;
    else await sleep(50);
  }
  const cpuMs = (cpuMicros(svc.pid) - cpuBefore) / 1000;
  await sleep(2000); // /health keeps being probed after the attack
  const h = await probe.stop();
  // What the client can read now: the answers the server wrote before it closed the connection.
  let raw = '';
  const { ended, finish } = settleOnce(socket, 3000, 'timeout', (ending) => ({ ending, answers: parseResponses(raw).length }));
  socket.on('data', (chunk) => (raw += chunk.toString('latin1')));
  socket.on('close', () => finish('closed'));
  socket.resume();
  const read = await ended;
  return {
    sent: 'one connection pipelining 1,000 `GET /metrics` in one write, never reading; /health probed on the API port',
    got: `closed by the server ${Number.isFinite(closedMs) ? `within ${Math.round(closedMs)} ms` : 'never'} (${read.answers} answers readable after it); service CPU ${cpuMs.toFixed(0)} ms until then; ${health(h)}`,
    failures: [
      ...(Number.isFinite(closedMs) ? [] : ['the connection was not closed']),
      ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
      ...(read.answers <= 64 ? [] : [`${read.answers} answers on one connection, more than the bound`]),
    ],
    details: { closedMs, cpuMs, answersRead: read.answers, ending: read.ending, health: h },
  };
}

/** 50 connections scraping in a closed loop: concurrent scrapes share a render, so a scrape costs less than a render. */
async function scrapeFlood(ctx) {
  const svc = await ctx.start('metrics-scrape-flood');
  const cpuPerScrape = async (connections, seconds) => {
    const before = cpuMicros(svc.pid);
    const load = await runWorker('keepalive', { port: svc.metricsPort, connections, seconds, path: '/metrics' });
    return { load, micros: (cpuMicros(svc.pid) - before) / Math.max(1, load.sent) };
  };
  // One connection, one scrape at a time: every scrape is a render of its own.
  const alone = await cpuPerScrape(1, 2);
  const probe = startHealthProbe(svc.port);
  const flood = await cpuPerScrape(50, 8);
  const h = await probe.stop();
  const peak = svc.peakRssMb();
  return {
    sent: '50 connections scraping `GET /metrics` in a closed loop for 8 s (after 2 s of one connection scraping alone); /health probed on the API port',
    got: `${flood.load.sent} scrapes (${statusText(flood.load)}), ${Math.round(flood.micros)} µs of service CPU per scrape against ${Math.round(alone.micros)} µs alone; ${health(h)}`,
    failures: [
      ...(flood.load.failed === 0 ? [] : [`${flood.load.failed} scrapes failed`]),
      ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
      ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
    ],
    details: { alone, flood, health: h },
  };
}

/**
 * 13. The memory budget: on each port, more connections than its cap, each holding an unfinished
 * request head just under the 8 KiB limit (what a connection costs at its worst), until the
 * header timeout cuts them. Those past the cap must be closed at once, the pod stay under its
 * 384 Mi limit, /health answer on a connection opened before, and on new ones once it is over.
 */
export async function connectionBudget(ctx) {
  return [await holdPastCap(ctx, 'api', CAP.api + 1000), await holdPastCap(ctx, 'metrics', CAP.metrics + 500)];
}

async function holdPastCap(ctx, port, count) {
  // The chart's liveness probe has a port of its own (PROBE_PORT); readiness is /health on the API port.
  const [probePort] = await freePorts(1);
  const svc = await ctx.start(`budget-${port}`, { PROBE_PORT: String(probePort) });
  const target = port === 'api' ? svc.port : svc.metricsPort;
  const admitted = net.connect(svc.port, '127.0.0.1');
  admitted.on('error', () => {});
  await connected(admitted);
  const askAdmitted = () =>
    new Promise((resolve) => {
      let raw = '';
      const onData = (d) => {
        raw += d.toString('latin1');
        if (raw.includes('\r\n\r\nok')) done(parseResponses(raw)[0]?.status);
      };
      const done = (status) => {
        admitted.off('data', onData);
        clearTimeout(timer);
        resolve(status ?? 'no answer');
      };
      const timer = setTimeout(() => done(undefined), 2000);
      admitted.on('data', onData);
      admitted.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    });
  const askNew = () =>
    request(svc.port, 'GET', '/health', undefined, 2000).then(
      (r) => r.status,
      (err) => err.code ?? err.message,
    );
  const rssBefore = rssMb(svc.pid);
  // As the kubelet's liveness probe, every second from before the hold until after the held are cut.
  const liveness = startHealthProbe(probePort, 1000);
  const head = `GET ${port === 'api' ? '/health' : '/metrics'} HTTP/1.1\r\nHost: localhost\r\nX-Pad: `;
  const t0 = performance.now();
  const conns = await openMany(target, count, head + 'a'.repeat(8000 - head.length), t0);
  await sleep(1000);
  const refused = conns.filter((c) => Number.isFinite(c.closedAfterS) && c.answer === '').length;
  const held = conns.filter((c) => !c.socket.destroyed).length;
  const rssHeld = rssMb(svc.pid);
  const duringAdmitted = await askAdmitted();
  const duringNew = await askNew();
  // headersTimeout 10 s, checked every 5 s: the held ones are cut by ~16 s after they opened.
  while (performance.now() - t0 < 20_000 && conns.some((c) => !c.socket.destroyed)) await sleep(250);
  const cut = tally(conns.filter((c) => c.answer !== '').map(firstStatus));
  for (const c of conns) c.socket.destroy();
  const live = await liveness.stop();
  await sleep(500);
  const after = await askNew();
  const rssAfter = rssMb(svc.pid);
  const counted = port === 'api' ? metricSum(await svc.metrics(), 'product_service_http_requests_refused_total', { reason: /^connection_limit$/ }) : undefined;
  admitted.destroy();
  const peak = svc.peakRssMb();
  const cap = CAP[port];
  return {
    sent: `${count} connections to the ${port} port (cap ${cap}), each holding an unfinished 8,000-byte request head; /health asked on an API connection opened before, and on new ones (readiness); liveness (/health on PROBE_PORT) every second`,
    got:
      `${held} held, ${refused} closed at once${counted === undefined ? '' : ` (counted: ${counted})`}; the held cut after ${Math.max(...conns.filter((c) => c.answer !== '').map((c) => c.closedAfterS)).toFixed(0)} s (${countsText(cut)}); ` +
      `/health during: ${duringAdmitted} on the admitted connection, ${duringNew} on a new one; after: ${after}; liveness ${health(live).replace('/health ', '')}; RSS ${rssBefore.toFixed(0)} MB before, ${rssHeld.toFixed(0)} MB held, ${rssAfter.toFixed(0)} MB after they closed`,
    failures: [
      // The admitted connection (and, on the API port, the probe's) take places of the API port's cap.
      ...(held <= cap && held >= cap - 2 ? [] : [`${held} held, not about ${cap}`]),
      ...(refused === count - held ? [] : [`${count - held - refused} closed otherwise than refused`]),
      // The counter also counts the probe on a new connection during the hold, when it was refused.
      ...(counted === undefined || counted === refused + (duringNew === 200 ? 0 : 1) ? [] : [`counted ${counted}, refused ${refused}`]),
      ...(cut[408] === held ? [] : ['not every held connection got 408']),
      ...(duringAdmitted === 200 ? [] : [`/health on the admitted connection: ${duringAdmitted}`]),
      ...(after === 200 ? [] : [`/health after: ${after}`]),
      ...(live.failures === 0 && live.probes >= 10 ? [] : [`liveness: ${live.failures} of ${live.probes} probes failed`]),
      // Readiness says the API port cannot take work while it is full.
      ...(port === 'metrics' || duringNew !== 200 ? [] : ['readiness (/health on a new API connection) answered while the API port was full']),
      ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
    ],
    rssMb: peak,
    details: { held, refused, counted, cut, duringAdmitted, duringNew, after, liveness: live, rssBefore, rssHeld, rssAfter },
  };
}
