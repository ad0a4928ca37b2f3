// The hostile run's classes 3 and 4: clients that pipeline without reading or hold connections. Each
// class gets a context (ctx.start starts a service of its own, harness.mjs) and returns table rows
// {sent, got, failures, rssMb?, details?}.
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { max } from '../lib.mjs';
import { connected, parseResponses } from './clients.mjs';
import { MB, countsText, health, runWorker, startHealthProbe, tally } from './harness.mjs';

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
 * 4. Connections held open for free, as many as MAX_CONNECTIONS' default (2048) leaves room for,
 * while /health is probed: 500 trickling the headers of a request, 1,400 saying nothing. All must
 * be cut off with 408.
 */
export async function slowlorisAndIdle(ctx) {
  const [tricklers, idlers] = [500, 1400];
  const svc = await ctx.start('slowloris-api');
  const target = svc.port;
  const t0 = performance.now();
  const probe = startHealthProbe(svc.port);
  const header = `GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ${'a'.repeat(100)}`;
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
