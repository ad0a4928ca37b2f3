// Runs: src in-process where the answer is what matters, dist/main.js where the real process does.
//
// Hostile and unusual HTTP through real sockets, on both ports: the answer on the wire and, where the
// request reached the service, what it recorded (histogram, product_ids_issued_total, log level).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { STATUS_CODES } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Gauge } from 'prom-client';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { parse } from 'yaml';
import { MAX_REQUESTS_PER_CONNECTION } from '../src/http/server';
import { REFUSAL_LOG_LIMIT, REFUSAL_LOG_MESSAGE } from '../src/http/connections';
import { requestCount, sampleValue, samples, scrape } from './support/exposition';
import { inProcessForSuite, inProcessForTest, SHORT_TIMEOUTS, type InProcessService } from './support/in-process';
import { startOtlpReceiver } from './support/otlp-receiver';
import { openRaw, parseResponse, rawExchange, type ParsedResponse } from './support/raw-http';
import { rssMiB, serviceForTest } from './support/service-process';

const MiB = 1024 * 1024;

/** The statuses requests were recorded with (the series the service creates at 0 count none). */
function statusesCounted(exposition: string): number[] {
  return samples(exposition, 'http_server_request_duration_seconds_count')
    .filter(({ value }) => value > 0)
    .map(({ labels }) => Number(labels.http_response_status_code));
}

const idsIssued = (exposition: string): number | undefined => sampleValue(exposition, 'product_ids_issued_total');

/** A problem+json answer in the service's shape (titled by its status), with nosniff and no-store. */
function expectProblem(answer: ParsedResponse, status: number): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toBe('application/problem+json');
  expect(answer.headers['x-content-type-options']).toBe('nosniff');
  expect(answer.headers['cache-control']).toBe('no-store');
  expect(JSON.parse(answer.body)).toMatchObject({ type: 'about:blank', status, title: STATUS_CODES[status] });
}

function isCompleteResponse(raw: string): boolean {
  const end = raw.indexOf('\r\n\r\n');
  return end >= 0 && raw.length >= end + 4 + Number(/content-length: (\d+)/i.exec(raw)?.[1] ?? 0);
}

async function exchangeUntilClosed(port: number, payload: string): Promise<string> {
  const connection = await openRaw(port);
  connection.socket.write(payload);
  await Promise.race([connection.closed, sleep(3000).then(() => Promise.reject(new Error(`still open; received: ${connection.received()}`)))]);
  return connection.received();
}

describe('a client that leaves in the middle of its body', () => {
  it('is recorded as 499 in the histogram, the info request line and the server span (named and routed POST /product); nothing is written to it, no id is issued, nothing is logged as an error', async () => {
    const collector = await startOtlpReceiver('ok');
    onTestFinished(() => collector.close());
    const svc = await serviceForTest({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '200', TRACE_CONTEXT_FROM: '127.0.0.1' }); // the traceparent it sends is believed
    const leaving: Array<[string, (socket: Socket) => void]> = [
      ['closes its side (FIN)', (socket) => socket.end()],
      ['resets the connection (RST)', (socket) => socket.resetAndDestroy()],
    ];
    const traceIds: string[] = [];
    for (const [, leave] of leaving) {
      const traceId = randomBytes(16).toString('hex');
      traceIds.push(traceId);
      const connection = await openRaw(svc.port);
      connection.socket.write(`POST /product HTTP/1.1\r\nHost: x\r\ntraceparent: 00-${traceId}-00f067aa0ba902b7-01\r\nContent-Length: 1000\r\n\r\n{"name":`);
      await sleep(200); // the route is reading the body
      leave(connection.socket);
      await connection.closed;
      expect(connection.received()).toBe('');
    }

    await svc.waitForLog((line) => line.msg === 'request completed' && line.status === 499 && svc.logLines().filter((l) => l.status === 499).length === 2);
    const lines = svc.logLines().filter((line) => line.msg === 'request completed' && line.route === '/product');
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toMatchObject({ level: 'info', method: 'POST', status: 499 });
    expect(svc.logLines().filter((line) => ['error', 'fatal', 'warn'].includes(String(line.level)))).toEqual([]);

    const exposition = await scrape(svc.metricsUrl);
    expect(requestCount(exposition, 'POST', '/product', 499)).toBe(2);
    expect(statusesCounted(exposition).filter((status) => status >= 500)).toEqual([]);
    expect(idsIssued(exposition)).toBe(0);

    const spans = await collector.waitForSpans((span) => span.kind === 2 && traceIds.includes(span.traceId), 2);
    for (const traceId of traceIds) {
      const span = spans.find((s) => s.kind === 2 && s.traceId === traceId);
      expect(span?.attributes['http.response.status_code']).toBe(499);
      // Named and routed as every other request of its route, though it ended before Koa's middleware resumed.
      expect(span?.name).toBe('POST /product');
      expect(span?.attributes['http.route']).toBe('/product');
      expect(span?.status.code).not.toBe(2);
    }
  });
});

describe('a request answered 408 because its body came too slowly', () => {
  it('is recorded as 408 (not 201, not 499) and issues no id, even when the rest of its body arrives after the answer', async () => {
    const svc = await inProcessForTest({}, SHORT_TIMEOUTS);
    const connection = await openRaw(svc.port);
    connection.socket.write('POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc');
    const raw = await connection.waitFor(isCompleteResponse, 3000);
    expectProblem(parseResponse(raw), 408);
    expect(parseResponse(raw).headers.connection).toBe('close');
    const traceId = parseResponse(raw).headers.traceresponse?.split('-')[1];
    expect(JSON.parse(parseResponse(raw).body)).toMatchObject({ detail: 'The request was not received in time.', trace_id: traceId });
    connection.socket.write('defghij'); // the rest of the body, too late
    await connection.closed;
    expect(connection.received()).toBe(raw);

    await vi.waitFor(() => expect(svc.logs.map((line) => line.msg)).toContain('request completed'), {
      timeout: 3000,
      interval: 20,
      message: 'the request line',
    });
    // One id for the request: the refusal's line and the request's carry the one its answer gave.
    expect(svc.logs.filter((line) => line.msg === 'request completed')).toEqual([
      expect.objectContaining({ level: 'info', status: 408, route: '/product', trace_id: traceId }),
    ]);
    expect(svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE)).toEqual([
      expect.objectContaining({ level: 'info', status: 408, in_application: true, peer: '127.0.0.1', trace_id: traceId }),
    ]);
    expect(svc.logs.filter((line) => line.level === 'error')).toEqual([]);
    const exposition = await svc.exposition();
    // The application recorded it (the histogram), so it is no refusal before the application.
    expect(sampleValue(exposition, 'product_service_http_requests_refused_total', { reason: 'request_timeout' })).toBe(0);
    expect(requestCount(exposition, 'POST', '/product', 408)).toBe(1);
    expect(statusesCounted(exposition)).toEqual([408]);
    expect(idsIssued(exposition)).toBe(0);
  });
});

describe('Expect: 100-continue', () => {
  const svc = inProcessForSuite();

  it('with a Content-Length over the limit: 413 at once, no 100 Continue, and the connection closes', async () => {
    const raw = await exchangeUntilClosed(svc.port, `POST /product HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ${20 * MiB}\r\n\r\n`);
    expect(raw).not.toContain('100 Continue');
    const answer = parseResponse(raw);
    expectProblem(answer, 413);
    expect(answer.headers.connection).toBe('close');
  });

  it('within the limit: 100 Continue, then 201 once the body is sent', async () => {
    const connection = await openRaw(svc.port);
    connection.socket.write('POST /product HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n');
    expect(await connection.waitFor((raw) => raw.endsWith('\r\n\r\n'))).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    connection.socket.write('{}');
    const raw = await connection.waitFor((r) => r.includes('product_id'));
    const answer = parseResponse(raw.slice('HTTP/1.1 100 Continue\r\n\r\n'.length));
    expect(answer.status).toBe(201);
    connection.socket.destroy();
  });

  it('on a path that does not read the body: the final answer without 100 Continue, and the connection closes (the body may still come)', async () => {
    const raw = await exchangeUntilClosed(svc.port, 'POST /nowhere HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n');
    expect(raw).not.toContain('100 Continue');
    const answer = parseResponse(raw);
    expectProblem(answer, 404);
    expect(answer.headers.connection).toBe('close');
  });
});

/**
 * Sends a request announcing `bodyBytes` and the whole body in 64 KiB writes, reading nothing
 * until it has written everything (as most simple clients do), then reads the answer.
 */
function sendWholeBodyThenRead(port: number, bodyBytes: number): Promise<{ raw: string; wrote: number }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.pause();
    const chunks: Buffer[] = [];
    let wrote = 0;
    const piece = Buffer.alloc(64 * 1024, 120);
    const readAnswer = (): void => {
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.resume();
    };
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ raw: Buffer.concat(chunks).toString('latin1'), wrote }));
    socket.on('connect', () => {
      socket.write(`POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: ${bodyBytes}\r\n\r\n`);
      const pump = (): void => {
        while (wrote < bodyBytes && !socket.destroyed) {
          wrote += piece.length;
          if (!socket.write(piece)) return;
        }
        readAnswer();
      };
      socket.on('drain', pump);
      pump();
    });
  });
}

describe('a body over the limit from a client still sending it', () => {
  it('a client that has sent past the limit and then reads gets the 413 problem answer, written before the server closes without reading the rest', async () => {
    const svc = await inProcessForTest();
    const connection = await openRaw(svc.port);
    connection.socket.write(`POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: ${20 * MiB}\r\n\r\n`);
    connection.socket.write(Buffer.alloc(1.5 * MiB, 120));
    await connection.closed;
    const answer = parseResponse(connection.received());
    expectProblem(answer, 413);
    expect(answer.headers.connection).toBe('close');
  });

  it('20 clients each writing a 20 MB body before reading anything: each is closed soon after the limit, all 20 recorded as 413 (the answer may be lost to the reset: no lingering close)', async () => {
    const svc = await inProcessForTest();
    const results = await Promise.all(Array.from({ length: 20 }, () => sendWholeBodyThenRead(svc.port, 20 * 1000 * 1000)));
    for (const { raw, wrote } of results) {
      // The 1 MiB read before the 413 and the socket buffers: far from 20 MB.
      expect(wrote).toBeLessThan(16 * MiB);
      if (raw !== '') expectProblem(parseResponse(raw), 413);
    }
    expect(requestCount(await svc.exposition(), 'POST', '/product', 413)).toBe(20);
  });
});

/** A request whose framing two parsers could read differently, and the one it would smuggle behind it. */
const SMUGGLING = 'POST /product HTTP/1.1\r\nHost: x\r\n';
const BEHIND = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';

const PARSER_DETAIL: Record<number, RegExp> = {
  431: /^The request headers are larger than the server accepts\.$/,
  505: /^This server speaks HTTP\/1\.0 and HTTP\/1\.1 only\.$/,
};

describe.each<[port: string, portOf: (svc: InProcessService) => number]>([
  ['the API port', (svc) => svc.port],
  ['the metrics port', (svc) => svc.metricsPort],
])('HTTP that Node lets through or answers outside the service error shape, on %s', (_port, portOf) => {
  const svc = inProcessForSuite();

  it.each([
    ['a malformed request line', 400, 'THIS IS NOT HTTP\r\n\r\n'],
    ['a bad header line', 400, 'GET /health HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n'],
    [
      'conflicting Content-Length and Transfer-Encoding (request smuggling)',
      400,
      'POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    [
      'Content-Length: 5 and Content-Length: 6 (request smuggling), the GET behind it not answered',
      400,
      `${SMUGGLING}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!${BEHIND}`,
    ],
    [
      'Transfer-Encoding: chunked, identity (request smuggling), the GET behind it not answered',
      400,
      `${SMUGGLING}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${BEHIND}`,
    ],
    [
      'Transfer-Encoding with a space before the colon (request smuggling), the GET behind it not answered',
      400,
      `${SMUGGLING}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${BEHIND}`,
    ],
    [
      'Transfer-Encoding: <vertical tab>chunked (request smuggling), the GET behind it not answered',
      400,
      `${SMUGGLING}Transfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n${BEHIND}`,
    ],
    ['HTTP/1.1 without Host', 400, 'GET /health HTTP/1.1\r\n\r\n'],
    ['two Host headers', 400, 'GET /health HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n'],
    [
      'Expect: bogus, the POST pipelined behind it not served',
      417,
      'POST /product HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 2\r\n\r\n{}POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}',
    ],
    ['CONNECT (with an empty Allow)', 405, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'],
    ['an HTTP/2.0 request line', 505, 'GET /health HTTP/2.0\r\nHost: x\r\n\r\n'],
    ['an HTTP/3.0 request line', 505, 'GET /health HTTP/3.0\r\nHost: x\r\n\r\n'],
    ['an HTTP/0.9 request line', 505, 'GET /health\r\n\r\n'],
    ['bare LF line endings (broken syntax the parser reports as a bad version)', 400, 'GET /health HTTP/1.1\nHost: x\n\n'],
    [
      'HTTP/1.0 with Transfer-Encoding (RFC 9112 §6.1: faulty framing), the request pipelined behind it not answered',
      400,
      'POST /product HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n',
    ],
    ['headers over 8 KiB', 431, `GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(9 * 1024)}\r\n\r\n`],
    ['an absolute-form target with a scheme other than http or https', 400, 'POST file:///product HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n'],
  ])('%s: %i problem+json with nosniff and no-store, then the connection closes', async (_case, status, payload) => {
    const raw = await exchangeUntilClosed(portOf(svc), payload);
    const answer = parseResponse(raw);
    expectProblem(answer, status);
    // Each says what was wrong; the parser's own refusals in words of the status.
    expect((JSON.parse(answer.body) as { detail: string }).detail).toMatch(PARSER_DETAIL[status] ?? /\w/);
    expect(answer.headers.connection).toBe('close');
    expect(raw.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1);
    expect(raw.startsWith(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n`)).toBe(true);
    if (status === 405) expect(answer.headers.allow).toBe('');
  });

  it('issued no id for any of them, and HTTP/1.0 without Transfer-Encoding is still served', async () => {
    expect(idsIssued(await svc.exposition())).toBe(0);
    expect(parseResponse(await exchangeUntilClosed(svc.port, 'POST /product HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}')).status).toBe(201);
  });
});

/**
 * The chart's pod memory and the heap it gives Node there (values.yaml), written out for a service
 * started here: this process is in no memory cgroup, where `--max-old-space-size-percentage` applies.
 */
const POD = (() => {
  const values = parse(readFileSync(join(__dirname, '../helm/product-service/values.yaml'), 'utf8')) as {
    resources: { limits: { memory: string } };
    nodeHeapPercent: number;
    nodeSemiSpaceMb: number;
  };
  const limit = /^(\d+)Mi$/.exec(values.resources.limits.memory)?.[1];
  if (limit === undefined) throw new Error(`values.yaml's resources.limits.memory is not in Mi: ${values.resources.limits.memory}`);
  const limitMiB = Number(limit);
  return { limitMiB, heapMiB: Math.floor((limitMiB * values.nodeHeapPercent) / 100), semiSpaceMiB: values.nodeSemiSpaceMb };
})();

describe('pipelining', () => {
  const post = 'POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}';

  it(`a client pipelining more than ${MAX_REQUESTS_PER_CONNECTION} requests in one write and reading the answers gets ${MAX_REQUESTS_PER_CONNECTION}, the last with Connection: close, then a 503 (Node's) and the close`, async () => {
    const svc = await inProcessForTest();
    const raw = await exchangeUntilClosed(svc.port, post.repeat(MAX_REQUESTS_PER_CONNECTION + 20));
    const answers = raw.split('HTTP/1.1 ').slice(1);
    expect(answers.slice(0, MAX_REQUESTS_PER_CONNECTION).every((answer) => answer.startsWith('201 Created'))).toBe(true);
    expect(answers[MAX_REQUESTS_PER_CONNECTION - 1]).toMatch(/\r\nConnection: close\r\n/i);
    // Node's own answer to the first request past the bound, written before the connection is closed.
    expect(answers.slice(MAX_REQUESTS_PER_CONNECTION)).toEqual([expect.stringMatching(/^503 Service Unavailable\r\n/)]);
    expect(svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE)).toEqual([
      expect.objectContaining({ level: 'warn', detail: `The connection sent more than ${MAX_REQUESTS_PER_CONNECTION} requests.`, peer: '127.0.0.1' }),
    ]);
    expect(sampleValue(await svc.exposition(), 'product_service_http_requests_refused_total', { reason: 'pipelining_limit' })).toBe(1);
  });

  it('an HTTP/1.0 client pipelining keep-alive requests gets one answer, with Connection: close (the bound counts HTTP/1.1 only)', async () => {
    const svc = await inProcessForTest();
    const raw = await exchangeUntilClosed(svc.port, 'GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n'.repeat(10));
    expect(raw.split('HTTP/1.1 ')).toHaveLength(2);
    expect(parseResponse(raw).headers.connection).toBe('close');
  });

  it('20 connections pipelining ~4,700 POSTs each without reading: each is closed, RSS stays under the chart limit (values.yaml), every /health meanwhile answers 200, ids only for answers given', async () => {
    // With the heap the chart gives the pod: V8 grows its heap as far as it may under allocation
    // pressure, so a peak only means something with the limit production has.
    // How long /health waits behind the 1,280 requests served is not bounded: a timed bound failed on
    // loaded CI, and the edge's connection limits bound such floods (docs/reliability.md).
    const svc = await serviceForTest({ NODE_OPTIONS: `--max-old-space-size=${POD.heapMiB}` });
    const rss = (): number => rssMiB(svc.child.pid ?? 0);
    const chunk = Buffer.from(post.repeat(1170)); // 64 KiB, what Node's parser reads at once
    const floods = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const socket = connect(svc.port, '127.0.0.1');
        socket.pause(); // never reads an answer
        socket.on('error', () => undefined);
        await once(socket, 'connect');
        for (let i = 0; i < 4; i += 1) socket.write(chunk);
        return socket;
      }),
    );
    const closedByServer = (): number => svc.logLines().filter((line) => line.msg === REFUSAL_LOG_MESSAGE && line.level === 'warn').length;
    let peakRss = rss();
    const healthStatuses: number[] = [];
    // Until the server has closed every flooding connection: RSS and /health, sampled.
    await vi.waitFor(
      async () => {
        peakRss = Math.max(peakRss, rss());
        healthStatuses.push((await fetch(`${svc.baseUrl}/health`)).status);
        peakRss = Math.max(peakRss, rss());
        expect(closedByServer()).toBe(floods.length);
      },
      { timeout: 20_000, interval: 50, message: 'the server closing every flooding connection (its warn lines)' },
    );
    // A socket the server closed reads as ended once it is resumed.
    for (const socket of floods) socket.resume();
    await vi.waitFor(() => expect(floods.filter((socket) => !socket.destroyed).length).toBe(0), {
      timeout: 5000,
      interval: 20,
      message: 'every flooding connection closed by the server',
    });
    expect(peakRss).toBeLessThan(POD.limitMiB);
    expect(healthStatuses.every((status) => status === 200)).toBe(true);

    expect(closedByServer()).toBe(20);
    const warnings = svc.logLines().filter((line) => line.level === 'warn');
    expect(warnings).toHaveLength(20);
    const exposition = await scrape(svc.metricsUrl);
    // No 201 series means no request was answered, so no id may have been issued.
    expect(idsIssued(exposition)).toBe(requestCount(exposition, 'POST', '/product', 201) ?? 0);
    expect(idsIssued(exposition)).toBeLessThanOrEqual(20 * MAX_REQUESTS_PER_CONNECTION);
  });
});

describe('connections held open for free (slowloris and idle)', () => {
  it('500 clients trickling their headers and 1,400 saying nothing (what MAX_CONNECTIONS leaves room for) each get 408 and the close; /health answers meanwhile', async () => {
    const svc = await inProcessForTest({}, SHORT_TIMEOUTS);
    const open = async (first?: string): Promise<Awaited<ReturnType<typeof openRaw>>> => {
      const connection = await openRaw(svc.port);
      if (first !== undefined) connection.socket.write(first);
      return connection;
    };
    // 250 at a time: a burst of thousands of SYNs overflows the accept backlog.
    const openMany = async (count: number, first?: string): Promise<Array<Awaited<ReturnType<typeof openRaw>>>> => {
      const all = [];
      for (let i = 0; i < count; i += 250) all.push(...(await Promise.all(Array.from({ length: Math.min(250, count - i) }, () => open(first)))));
      return all;
    };
    const tricklers = await openMany(500, 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: a');
    const trickle = setInterval(() => {
      for (const connection of tricklers) if (!connection.socket.destroyed) connection.socket.write('a');
    }, 50);
    onTestFinished(() => clearInterval(trickle));
    const idlers = await openMany(1400);
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);
    const all = [...tricklers, ...idlers];
    await Promise.all(all.map((connection) => connection.closed));
    expect(all.map((connection) => parseResponse(connection.received()).status)).toEqual(all.map(() => 408));
  });
});

describe('a collector that never answers, while clients send 7.5 KB User-Agents', () => {
  it("with the pod's heap: every request answered 201, /health answers, span attributes cut at 1,024 characters, RSS under the chart's memory limit", async () => {
    const collector = await startOtlpReceiver('hang');
    onTestFinished(() => collector.close());
    const svc = await serviceForTest({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      NODE_OPTIONS: `--max-old-space-size=${POD.heapMiB} --max-semi-space-size=${POD.semiSpaceMiB}`,
    });
    let peakRss = 0;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(svc.child.pid ?? 0))), 100);
    onTestFinished(() => clearInterval(sampler));
    const filler = randomBytes(7500).toString('base64');
    const statuses: number[] = [];
    const end = Date.now() + 5000;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (Date.now() < end) {
          // A distinct value per request, as distinct clients would send.
          const userAgent = `${statuses.length}-${filler}`.slice(0, 7500);
          const res = await fetch(`${svc.baseUrl}/product`, {
            method: 'POST',
            headers: { 'user-agent': userAgent, 'content-type': 'application/json' },
            body: '{}',
          });
          await res.arrayBuffer();
          statuses.push(res.status);
        }
      }),
    );
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);
    clearInterval(sampler);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.filter((status) => status !== 201)).toEqual([]);
    expect(collector.spans.length).toBeGreaterThan(0);
    expect(new Set(collector.spans.map((span) => String(span.attributes['user_agent.original']).length))).toEqual(new Set([1024]));
    expect(peakRss).toBeLessThan(POD.limitMiB);
  });
});

describe('a body cut into many chunks', () => {
  it('is not bounded in chunk count: a body of 100,000 one-byte chunks gets 201', async () => {
    const svc = await inProcessForTest();
    const connection = await openRaw(svc.port);
    connection.socket.write(`POST /product HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${'1\r\nx\r\n'.repeat(100_000)}0\r\n\r\n`);
    const answer = parseResponse(await connection.waitFor((raw) => raw.includes('product_id'), 10_000));
    expect(answer.status).toBe(201);
    connection.socket.destroy();
  });
});

describe('refusals in the log', () => {
  it(`a smuggling attempt leaves an info line with the peer's address; a flood of them at most ${REFUSAL_LOG_LIMIT.lines} lines per ${REFUSAL_LOG_LIMIT.windowMs / 1000} s`, async () => {
    const svc = await inProcessForTest();
    const smuggling = 'POST /product HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n';
    expect(parseResponse(await rawExchange(svc.port, smuggling)).status).toBe(400);
    expect(svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE)).toEqual([
      expect.objectContaining({ level: 'info', status: 400, code: 'HPE_INVALID_TRANSFER_ENCODING', peer: '127.0.0.1' }),
    ]);
    // Refused by the parser, before the application had the request.
    expect(svc.logs.find((line) => line.msg === REFUSAL_LOG_MESSAGE)).not.toHaveProperty('in_application');
    await Promise.all(Array.from({ length: REFUSAL_LOG_LIMIT.lines + 50 }, () => rawExchange(svc.port, 'BROKEN\r\n\r\n')));
    expect(svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE)).toHaveLength(REFUSAL_LOG_LIMIT.lines);

    // A window later, the next refusal is logged again, with the count of those that were not.
    const windowLater = performance.now() + REFUSAL_LOG_LIMIT.windowMs;
    vi.spyOn(performance, 'now').mockImplementation(() => windowLater);
    onTestFinished(() => {
      vi.restoreAllMocks();
    });
    await rawExchange(svc.port, 'BROKEN\r\n\r\n');
    const lines = svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE);
    expect(lines.slice(0, -1).filter((line) => 'not_logged_before' in line)).toEqual([]);
    expect(lines.at(-1)).toMatchObject({ status: 400, not_logged_before: 51 });
  });
});

describe('a request answered before its body has arrived', () => {
  it('gets no second answer when the rest of its body is malformed: the connection closes without writing', async () => {
    const svc = await inProcessForTest();
    const connection = await openRaw(svc.port);
    // /health answers without reading the body.
    connection.socket.write('GET /health HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n');
    await connection.waitFor((raw) => raw.endsWith('\r\n\r\nok'));
    connection.socket.write('zz\r\nnot a chunk\r\n');
    await connection.closed;
    expect(connection.received().split('HTTP/1.1 ')).toHaveLength(2);
    expect(parseResponse(connection.received()).status).toBe(200);
  });
});

describe('a malformed request pipelined behind a valid one', () => {
  it('gets its 400 after the answer before it, in order, then the connection closes', async () => {
    const svc = await inProcessForTest();
    const raw = await exchangeUntilClosed(svc.port, 'POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}BROKEN\r\n\r\n');
    const [first = '', second = ''] = raw.split(/(?=HTTP\/1\.1 )/);
    expect(parseResponse(first).status).toBe(201);
    expectProblem(parseResponse(second), 400);
  });

  // The version is judged on the bad request's own line, not on the first line of what arrived.
  it.each([
    ['HTTP/3.0', 505],
    ['HTTP/1.1x', 400],
  ])('a request line naming %s behind a valid request gets %i', async (version, status) => {
    const svc = await inProcessForTest();
    const raw = await exchangeUntilClosed(svc.port, `GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health ${version}\r\nHost: x\r\n\r\n`);
    const [first = '', second = ''] = raw.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(parseResponse(first).status).toBe(200);
    expectProblem(parseResponse(second), status);
  });
});

describe("NODE_OPTIONS=--insecure-http-parser (reachable through the chart's extraNodeOptions)", () => {
  it('loosens neither port: CL+TE, obs-fold, bare LF and NUL in a header are refused with 400, and the request after them is not served', async () => {
    const svc = await serviceForTest({ NODE_OPTIONS: '--insecure-http-parser' });
    const next = 'GET /health HTTP/1.1\r\nHost: a\r\n\r\n';
    const attempts = [
      `POST /product HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${next}`,
      `GET /health HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\n\r\n${next}`,
      `GET /health HTTP/1.1\nHost: a\n\n${next}`,
      `GET /health HTTP/1.1\r\nHost: a\r\nX-Nul: a\0b\r\n\r\n${next}`,
    ];
    for (const port of [svc.port, svc.metricsPort]) {
      for (const payload of attempts) {
        const raw = await exchangeUntilClosed(port, payload);
        expect(parseResponse(raw).status, JSON.stringify(payload)).toBe(400);
        expect(raw.split('HTTP/1.1 ').length - 1, JSON.stringify(payload)).toBe(1);
      }
    }
    expect(idsIssued(await (await fetch(svc.metricsUrl)).text())).toBe(0);
  });
});

describe('the metrics port, attacked as the API port is', () => {
  /**
   * Counts the service's renders of its exposition: a gauge whose collect() prom-client calls once
   * per render, and which holds each render until `release()`, so that a test can have every
   * scrape arrive while one render is under way.
   */
  function countRenders(svc: InProcessService): { renders: () => number; release: () => void } {
    let renders = 0;
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    new Gauge({
      name: 'test_renders',
      help: 'Renders of the exposition, counted by the test.',
      registers: [svc.metrics.registry],
      async collect() {
        renders += 1;
        await gate;
        this.set(renders);
      },
    });
    return { renders: () => renders, release: open };
  }

  function countRequests(svc: InProcessService): () => number {
    let received = 0;
    svc.metricsServer.on('request', () => (received += 1));
    return () => received;
  }

  const scrapeRequest = 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n';

  it('one connection pipelining 1,000 GET /metrics without reading: closed after the bound, one render for all it was answered, /health keeps answering, not counted as an API refusal', async () => {
    const svc = await inProcessForTest();
    const { renders, release } = countRenders(svc);
    const received = countRequests(svc);
    const socket = connect(svc.metricsPort, '127.0.0.1');
    socket.pause(); // never reads an answer
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write(scrapeRequest.repeat(1000));
    await vi.waitFor(() => expect(svc.logs.filter((line) => line.msg === REFUSAL_LOG_MESSAGE && line.level === 'warn')).toHaveLength(1), {
      timeout: 5000,
      interval: 10,
    });
    // While the one render is held, the API port answers.
    const health = await fetch(`${svc.baseUrl}/health`);
    expect(health.status).toBe(200);
    release();
    socket.resume();
    await vi.waitFor(() => expect(socket.destroyed).toBe(true), { timeout: 5000, interval: 10 });
    expect(received()).toBe(MAX_REQUESTS_PER_CONNECTION);
    expect(renders()).toBe(1);
    // The refusal counter is the API's.
    const exposition = await svc.exposition();
    expect(sampleValue(exposition, 'product_service_http_requests_refused_total', { reason: 'pipelining_limit' })).toBe(0);
  });

  it('50 concurrent scrapes on 50 connections: one render, and all 50 get the same exposition with no-store', async () => {
    const svc = await inProcessForTest();
    const { renders, release } = countRenders(svc);
    const received = countRequests(svc);
    const connections = await Promise.all(Array.from({ length: 50 }, () => openRaw(svc.metricsPort)));
    for (const connection of connections) connection.socket.write(scrapeRequest);
    await vi.waitFor(() => expect(received()).toBe(50), { timeout: 5000, interval: 10 });
    release();
    const answers = await Promise.all(connections.map(async (connection) => parseResponse(await connection.waitFor(isCompleteResponse))));
    for (const connection of connections) connection.socket.destroy();
    expect(renders()).toBe(1);
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 50 }, () => 200));
    expect(new Set(answers.map((answer) => answer.body)).size).toBe(1);
    for (const answer of answers) expect(answer.headers['cache-control']).toBe('no-store');
    // Once that render is done, the next scrape renders anew.
    expect(sampleValue(await scrape(svc.metricsUrl), 'test_renders')).toBe(2);
  });

  it('a client trickling its headers (slowloris) gets 408 and the connection closes, as on the API port', async () => {
    const svc = await inProcessForTest({}, SHORT_TIMEOUTS);
    const connection = await openRaw(svc.metricsPort);
    connection.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: a');
    const trickle = setInterval(() => connection.socket.write('a'), 50);
    onTestFinished(() => clearInterval(trickle));
    await connection.closed;
    const answer = parseResponse(connection.received());
    expectProblem(answer, 408);
    expect(answer.headers.connection).toBe('close');
  });
});
