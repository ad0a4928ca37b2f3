// Runs: dist/main.js (test/support/service-process.ts), since memory is the real process's; the
// header size limit and a half-open refused client in-process (test/support/in-process.ts).
//
// The memory budget (docs/reliability.md, "Memory budget"): connections per port and unfinished
// header bytes per connection are capped, so what clients can make the process hold is bounded.
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { REFUSAL_LOG_LIMIT, REFUSAL_LOG_MESSAGE } from '../src/http/connections';
import { PROBE_MAX_CONNECTIONS } from '../src/http/probe-server';
import { MAX_HEADER_SIZE, METRICS_MAX_CONNECTIONS } from '../src/http/server';
import { sampleValue, scrape } from './support/exposition';
import { inProcessForTest, SHORT_TIMEOUTS } from './support/in-process';
import { openRaw, parseResponse, rawExchange } from './support/raw-http';
import { freePort, rssMiB, serviceForTest } from './support/service-process';

/** The start of a request whose headers never end, `size` bytes long: what a connection holds at its worst. */
const unfinishedHead = (path: string, size: number): string => {
  const head = `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Pad: `;
  return head + 'a'.repeat(size - head.length);
};

interface Holder {
  socket: Socket;
  closedUnanswered(): boolean;
}

/** `count` connections to `port`, each writing `payload` and waiting; opened in batches so that the accept backlog never overflows. */
async function hold(port: number, count: number, payload: string): Promise<Holder[]> {
  const holders: Holder[] = [];
  for (let i = 0; i < count; i += 250) {
    const batch = Array.from({ length: Math.min(250, count - i) }, () => {
      const socket = connect(port, '127.0.0.1');
      let received = 0;
      let closed = false;
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
      socket.on('error', () => undefined);
      socket.on('close', () => (closed = true));
      onTestFinished(() => void socket.destroy());
      return { socket, closedUnanswered: () => closed && received === 0 };
    });
    await Promise.all(batch.map(({ socket }) => once(socket, 'connect')));
    for (const { socket } of batch) socket.write(payload);
    holders.push(...batch);
  }
  return holders;
}

describe('connections past the cap', () => {
  it('MAX_CONNECTIONS=50: of 1,500 connections holding unfinished 8 KB headers, those past the cap are closed at once and counted; /health still answers on a connection opened before; RSS grows by a fraction of what 1,500 would cost', async () => {
    const svc = await serviceForTest({ MAX_CONNECTIONS: '50' });
    const pid = svc.child.pid as number;
    const admitted = await openRaw(svc.port);
    await sleep(200);
    const before = rssMiB(pid);

    const holders = await hold(svc.port, 1500, unfinishedHead('/health', MAX_HEADER_SIZE - 200));
    // The refusals take as long as the accept queue takes to drain, which a loaded machine stretches: a wait, not a speed bound.
    const stillOpen = () => holders.filter((h) => !h.socket.destroyed).length;
    await vi.waitFor(() => expect(stillOpen()).toBeLessThanOrEqual(49), { timeout: 15_000, interval: 100 });
    await sleep(300);
    const refused = holders.filter((h) => h.closedUnanswered()).length;
    const held = stillOpen();
    const grew = rssMiB(pid) - before;

    // The admitted connection and (for a few seconds) the keep-alive one that waited for /health take two places.
    expect(held).toBeLessThanOrEqual(49);
    expect(held).toBeGreaterThanOrEqual(47);
    expect(refused).toBe(1500 - held);
    admitted.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(parseResponse(await admitted.waitFor((raw) => raw.includes('\r\n\r\nok'))).status).toBe(200);
    // Without the cap the 1,500 cost about 25 KB each (37 MiB); 50 of them cost about 1 MiB.
    expect(grew).toBeLessThan(15);

    for (const { socket } of holders) socket.destroy();
    await sleep(200);
    const exposition = await scrape(svc.metricsUrl);
    expect(sampleValue(exposition, 'product_service_http_requests_refused_total', { reason: 'connection_limit' })).toBe(refused);
    // As every refusal, at most so many lines however many were refused: a flood of refusals cannot flood the log.
    const lines = svc.logLines().filter((line) => line.msg === REFUSAL_LOG_MESSAGE);
    expect(lines).toHaveLength(REFUSAL_LOG_LIMIT.lines);
    expect(lines[0]).toMatchObject({ level: 'warn', detail: 'MAX_CONNECTIONS (50) are open.', max_connections: 50, peer: '127.0.0.1' });
  });

  it('MAX_CONNECTIONS=50 holds past headersTimeout: 60 idle clients that reconnect once closed are cut with 408 at each timeout and take the places back, never more than 50 open at once; those past the cap are still closed at once after each cut', async () => {
    const svc = await inProcessForTest({ env: { MAX_CONNECTIONS: '50' } }, SHORT_TIMEOUTS);
    const refused = async (reason: string): Promise<number> =>
      sampleValue(await svc.exposition(), 'product_service_http_requests_refused_total', { reason }) ?? 0;
    const openOnServer = (): Promise<number> =>
      new Promise((resolve, reject) => svc.apiServer.getConnections((error, count) => (error ? reject(error) : resolve(count))));
    // The game day's attacker (test/deploy/live-alerts.test.ts) at these timeouts' pace; it reads, so it sees the 408 and the close.
    const sockets = new Set<Socket>();
    let stopped = false;
    let cut = 0;
    const open = (): void => {
      const socket = connect(svc.port, '127.0.0.1');
      sockets.add(socket);
      socket.on('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 408')) cut += 1;
      });
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        if (!stopped) setTimeout(open, 50);
      });
    };
    onTestFinished(() => {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    });
    for (let i = 0; i < 60; i += 1) open();

    const afterFirstCut: number[] = [];
    let before = 0;
    let droppedAtFirstCut: number | undefined;
    for (const end = performance.now() + 2500; performance.now() < end; await sleep(20)) {
      const count = await openOnServer();
      if (cut === 0) before = Math.max(before, count);
      else afterFirstCut.push(count);
      droppedAtFirstCut ??= cut > 0 ? await refused('connection_limit') : undefined;
    }
    // Several rounds of 50 cut, each followed by the cap full again and refusing the other 10.
    expect(before).toBe(50);
    expect(cut).toBeGreaterThanOrEqual(150);
    expect(Math.max(...afterFirstCut)).toBe(50);
    expect(await refused('connection_limit')).toBeGreaterThan((droppedAtFirstCut ?? Infinity) + 50);
  });

  it('MAX_CONNECTIONS=1: a client answered 400 on its socket that never closes its side gives its place back', async () => {
    const svc = await inProcessForTest({ env: { MAX_CONNECTIONS: '1' } });
    // Half-open allowed: the client does not end its side when the server ends its own.
    const refused = connect({ port: svc.port, host: '127.0.0.1', allowHalfOpen: true });
    onTestFinished(() => void refused.destroy());
    refused.resume().write('THIS IS NOT HTTP\r\n\r\n');
    await once(refused, 'end');
    expect(parseResponse(await rawExchange(svc.port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).status).toBe(200);
  });

  it(`the metrics port holds ${METRICS_MAX_CONNECTIONS} connections at most, and a scrape answers once they close`, async () => {
    const svc = await serviceForTest();
    const holders = await hold(svc.metricsPort, METRICS_MAX_CONNECTIONS + 40, unfinishedHead('/metrics', 1000));
    await sleep(500);
    const held = holders.filter((h) => !h.socket.destroyed).length;
    expect(held).toBe(METRICS_MAX_CONNECTIONS);
    expect(holders.filter((h) => h.closedUnanswered())).toHaveLength(40);
    for (const { socket } of holders) socket.destroy();
    await sleep(200);
    // The metrics port's refusals are logged, not counted in the API's refusal counter.
    const exposition = await scrape(svc.metricsUrl);
    expect(sampleValue(exposition, 'product_service_http_requests_refused_total', { reason: 'connection_limit' })).toBe(0);
    expect(svc.logLines().some((line) => line.msg === REFUSAL_LOG_MESSAGE && line.max_connections === METRICS_MAX_CONNECTIONS)).toBe(true);
  });
});

describe("the probe port (PROBE_PORT), which the chart's liveness probe calls", () => {
  it('answers GET /health on every new connection while the API port (MAX_CONNECTIONS=50) and the metrics port are held full; readiness, /health on the API port, fails meanwhile and answers once they close', async () => {
    const probePort = await freePort();
    const svc = await serviceForTest({ MAX_CONNECTIONS: '50', PROBE_PORT: String(probePort) });
    expect(await svc.waitForLog((line) => line.msg === 'product-service listening')).toMatchObject({ probe_port: probePort });
    // As the kubelet probes: a new connection each time (fetch would reuse one), its timeout (the chart's readiness probe: 2 s).
    const probe = async (port: number): Promise<number | string> => {
      const raw = await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 2000);
      return raw.endsWith('\r\n\r\nok') ? parseResponse(raw).status : `no answer: ${JSON.stringify(raw.slice(0, 40))}`;
    };
    const holders = [
      ...(await hold(svc.port, 60, unfinishedHead('/health', 1000))),
      ...(await hold(svc.metricsPort, METRICS_MAX_CONNECTIONS + 10, unfinishedHead('/metrics', 1000))),
    ];
    await sleep(300);
    const liveness: Array<number | string> = [];
    for (let i = 0; i < 10; i += 1) liveness.push(await probe(probePort));
    expect(liveness).toEqual(Array.from({ length: 10 }, () => 200));
    expect(await probe(svc.port)).not.toBe(200);
    expect(await probe(svc.port)).not.toBe(200);

    for (const { socket } of holders) socket.destroy();
    await sleep(300);
    expect(await probe(svc.port)).toBe(200);
    expect((await fetch(`http://127.0.0.1:${probePort}/metrics`)).status).toBe(404);
    expect(parseResponse(await rawExchange(probePort, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).headers['content-type']).toBe(
      'text/plain; charset=utf-8',
    );
  });

  it(`holds ${PROBE_MAX_CONNECTIONS} connections at once: one more is closed unanswered, with a warn line`, async () => {
    const probePort = await freePort();
    const svc = await serviceForTest({ PROBE_PORT: String(probePort) });
    const holders = await hold(probePort, PROBE_MAX_CONNECTIONS + 1, unfinishedHead('/health', 1000));
    await vi.waitFor(() => expect(holders.filter((holder) => holder.closedUnanswered())).toHaveLength(1), { timeout: 5000, interval: 50 });
    expect(await svc.waitForLog((line) => line.msg === REFUSAL_LOG_MESSAGE && line.max_connections === PROBE_MAX_CONNECTIONS)).toMatchObject({ level: 'warn' });
  });
});

describe(`request heads over ${MAX_HEADER_SIZE} bytes`, () => {
  it('get 431 on both ports; a head just under the limit is served', async () => {
    const svc = await inProcessForTest();
    const over = `${unfinishedHead('/health', MAX_HEADER_SIZE + 100)}\r\n\r\n`;
    const under = `${unfinishedHead('/health', MAX_HEADER_SIZE - 200)}\r\n\r\n`;
    expect(parseResponse(await rawExchange(svc.port, over)).status).toBe(431);
    expect(parseResponse(await rawExchange(svc.metricsPort, over.replace('/health', '/metrics'))).status).toBe(431);
    expect(parseResponse(await rawExchange(svc.port, `${under.slice(0, -4)}\r\nConnection: close\r\n\r\n`)).status).toBe(200);
  });
});
