// Runs: src in-process (test/support/in-process.ts): no build needed.

import { STATUS_CODES } from 'node:http';
import request from 'supertest';
import { describe, expect, it, vi } from 'vitest';
import { sampleValue, requestCount } from './support/exposition';
import { debugLogger, inProcessForSuite } from './support/in-process';
import { openRaw, parseResponse, rawExchange, type ParsedResponse } from './support/raw-http';
import { parseConfig } from '../src/config';
import { createApp } from '../src/http/app';
import { createRouter, PRODUCT_ID_MAX as MAX_ID } from '../src/http/routes';
import { createMetrics } from '../src/observability/metrics';

const service = inProcessForSuite();

function expectProductAnswer(response: request.Response): void {
  expect(response.status).toBe(201);
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
  const body = JSON.parse(response.text) as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['product_id']);
  expect(Number.isInteger(body.product_id)).toBe(true);
  expect(body.product_id).toBeGreaterThanOrEqual(1);
  expect(body.product_id).toBeLessThanOrEqual(MAX_ID);
}

function expectProblem(response: Pick<request.Response, 'status' | 'headers' | 'text'>, status: number): void {
  expect(response.status).toBe(status);
  expect(response.headers['content-type']).toBe('application/problem+json');
  expect(JSON.parse(response.text)).toMatchObject({ type: 'about:blank', status, title: STATUS_CODES[status] });
}

describe('POST /product accepts any body as given', () => {
  it.each<[string, (post: request.Test) => request.Test]>([
    ['no body at all', (post) => post],
    ['a JSON object', (post) => post.send({ name: 'chair', price: 10 })],
    ['invalid JSON under a JSON content type', (post) => post.set('Content-Type', 'application/json').send('{"name": ')],
    ['a JSON array', (post) => post.set('Content-Type', 'application/json').send('[1,2,3]')],
    ['plain text', (post) => post.set('Content-Type', 'text/plain').send('hello')],
    ['form data', (post) => post.type('form').send({ a: '1', b: '2' })],
    ['binary data', (post) => post.set('Content-Type', 'application/octet-stream').send(Buffer.from([0, 255, 1, 254, 0, 0]))],
    ['a body of exactly the limit', (post) => post.set('Content-Type', 'application/octet-stream').send(Buffer.alloc(1024 * 1024, 1))],
  ])('with %s', async (_body, send) => {
    expectProductAnswer(await send(request(service.baseUrl).post('/product')));
  });
  it('gives a fresh id per request', async () => {
    const ids = new Set<number>();
    for (let i = 0; i < 20; i++) ids.add(((await request(service.baseUrl).post('/product')).body as { product_id: number }).product_id);
    // 20 draws from 2^31 values: a repeat has probability ~1e-7.
    expect(ids.size).toBe(20);
  });
});

describe('a body over the limit gets 413', () => {
  it('at once, when Content-Length announces it, before any body byte is sent', async () => {
    const raw = await rawExchange(service.port, `POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 * 1024 + 1}\r\n\r\n`);
    const answer = parseResponse(raw);
    expect(answer.status).toBe(413);
    expect(answer.headers['content-type']).toBe('application/problem+json');
    expect(answer.headers.connection).toBe('close');
    expect(JSON.parse(answer.body)).toMatchObject({
      status: 413,
      title: 'Payload Too Large',
      detail: `The request body is larger than the limit of ${1024 * 1024} bytes.`,
    });
  });

  it('as soon as a chunked body crosses the limit, without waiting for its end', async () => {
    const connection = await openRaw(service.port);
    connection.socket.write('POST /product HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
    // 1.25 MiB in 64 KiB chunks, and the body is never ended: only an early answer comes.
    for (let i = 0; i < 20; i++) connection.socket.write(`10000\r\n${'x'.repeat(64 * 1024)}\r\n`);
    expect(parseResponse(await connection.waitFor((raw) => raw.includes('\r\n\r\n'))).status).toBe(413);
    connection.socket.destroy();
  });

  it('and the service stays healthy afterwards', async () => {
    await rawExchange(service.port, `POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n`);
    expectProductAnswer(await request(service.baseUrl).post('/product').send('small'));
    expect((await request(service.baseUrl).get('/health')).status).toBe(200);
  });
});

describe('GET and HEAD /health', () => {
  it('GET answers 200 text/plain "ok"', async () => {
    const response = await request(service.baseUrl).get('/health');
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(response.text).toBe('ok');
  });
  it("HEAD answers 200 with GET's content type and no body", async () => {
    const raw = await rawExchange(service.port, 'HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const headEnd = raw.indexOf('\r\n\r\n');
    expect(raw.slice(0, 12)).toBe('HTTP/1.1 200');
    expect(raw.slice(headEnd + 4)).toBe('');
    expect(parseResponse(raw).headers['content-type']).toBe('text/plain; charset=utf-8');
  });
});

describe('unknown paths and wrong methods', () => {
  // An unknown path's 404 (/nowhere, /products, /metrics) and a chunked body's 201: test/contract.test.ts.
  it.each([
    ['/', 404],
    ['/product/1', 404],
    // A query string does not change the path: /product exists, GET on it is not allowed.
    ['/product?x=1/..', 405],
  ])('GET %s answers %i problem+json', async (path, status) => {
    expectProblem(await request(service.baseUrl).get(path), status);
  });

  // Koa's router is case-insensitive and tolerates a trailing slash, as most routers do.
  it.each(['/health/', '/HEALTH'])('GET %s answers 200, as /health does', async (path) => {
    expect((await request(service.baseUrl).get(path)).status).toBe(200);
  });

  it.each([
    ['GET', '/product', 'POST'],
    ['PUT', '/product', 'POST'],
    ['DELETE', '/product', 'POST'],
    ['PATCH', '/product', 'POST'],
    ['POST', '/health', 'HEAD, GET'],
    ['DELETE', '/health', 'HEAD, GET'],
  ])('%s %s is 405 with Allow: %s', async (method, path, allow) => {
    const response = await request(service.baseUrl)[method.toLowerCase() as 'get'](path);
    expectProblem(response, 405);
    expect(response.headers.allow).toBe(allow);
  });

  it('a method the router never registers (TRACE) is still 405, not 501', async () => {
    const raw = await rawExchange(service.port, 'TRACE /product HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const answer = parseResponse(raw);
    expect(answer.status).toBe(405);
    expect(answer.headers.allow).toBe('POST');
  });
});

describe('absolute-form request targets (RFC 9112 §3.2.2)', () => {
  const svc = inProcessForSuite();
  const idsIssued = (exposition: string): number | undefined => sampleValue(exposition, 'product_ids_issued_total');
  const send = async (port: number, line: string): Promise<ParsedResponse> =>
    parseResponse(await rawExchange(port, `${line} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`));

  it('http and https ones are served as their path: the probe, the product, the scrape, each recorded under its route', async () => {
    expect((await send(svc.port, 'GET http://forged.example/health')).body).toBe('ok');
    expect((await send(svc.port, 'HEAD HTTPS://forged.example:4443/health?probe=1')).status).toBe(200);
    expect((await send(svc.port, 'POST http://forged.example/product?x=1')).status).toBe(201);
    expect((await send(svc.port, 'GET http://forged.example')).status).toBe(404);
    expect((await send(svc.metricsPort, 'GET http://forged.example/metrics')).status).toBe(200);
    const exposition = await svc.exposition();
    expect(requestCount(exposition, 'GET', '/health', 200)).toBe(1);
    expect(requestCount(exposition, 'HEAD', '/health', 200)).toBe(1);
    expect(idsIssued(exposition)).toBe(1);
  });

  it.each(['POST file:///product', 'GET ftp://forged.example/health', 'GET httpx://forged.example/health', 'GET xhttp://forged.example/health'])(
    '%s: 400, saying which targets are served; no id, not recorded as a route, counted as a refusal',
    async (line) => {
      const before = await svc.exposition();
      const answer = await send(svc.port, line);
      expectProblem({ ...answer, text: answer.body }, 400);
      expect(answer.headers['cache-control']).toBe('no-store');
      expect(JSON.parse(answer.body)).toMatchObject({
        detail: 'Only origin-form request targets (/path) and absolute-form http:// or https:// targets are served.',
      });
      const after = await svc.exposition();
      expect(idsIssued(after)).toBe(idsIssued(before));
      const refused = (exposition: string): number => sampleValue(exposition, 'product_service_http_requests_refused_total', { reason: 'bad_request' }) ?? 0;
      expect(refused(after)).toBe(refused(before) + 1);
    },
  );
});

describe('a client that resets its connection mid-request', () => {
  it('is a debug line, not an error, and its request a 499', async () => {
    const from = service.logs.length;
    const connection = await openRaw(service.port);
    connection.socket.write('POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n');
    // The 100 Continue says the request reached the app, which now waits for its body.
    await connection.waitFor((raw) => raw.includes('100 Continue'));
    connection.socket.resetAndDestroy();
    const lines = await vi.waitFor(
      () => {
        const mine = service.logs.slice(from);
        expect(mine.map(({ level, msg }) => `${String(level)} ${String(msg)}`)).toEqual(['debug client connection failed', 'info request completed']);
        return mine;
      },
      { timeout: 5000, interval: 20 },
    );
    expect(lines[0]?.err).toMatchObject({ code: 'ECONNRESET' });
    expect(lines[1]).toMatchObject({ method: 'POST', route: '/product', status: 499 });
  });
});

// Koa reports there what no middleware caught: a socket's error while answering, or a fault in the chain itself.
describe('an error the Koa app reports outside the request handlers', () => {
  it.each([
    // ECONNRESET: a real reset, above.
    ['EPIPE', 'debug', 'client connection failed'],
    ['ERR_STREAM_DESTROYED', 'error', 'error outside a request handler'],
  ])('%s is a JSON %s line, not a stack on stderr', (code, level, msg) => {
    const { logger, logs } = debugLogger();
    const metrics = createMetrics({ service: { name: 'product-service', version: 'test', revision: 'test', config: 'test' }, processMetrics: false });
    const app = createApp({ router: createRouter({ config: parseConfig({}), metrics }), logger, metrics });
    app.emit('error', Object.assign(new Error('boom'), { code }));
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ level, msg, err: { code, message: 'boom' } });
  });
});

describe('every answer', () => {
  it.each([
    ['post', '/product'],
    ['get', '/health'],
    ['get', '/nowhere'],
    ['get', '/product'],
  ] as const)('%s %s carries nosniff and no framework names', async (method, path) => {
    const response = await request(service.baseUrl)[method](path);
    expect(response.headers['x-content-type-options']).toBe('nosniff');
    expect(response.headers['x-powered-by']).toBeUndefined();
    expect(JSON.stringify(response.headers).toLowerCase()).not.toMatch(/koa|express|node/);
    expect(response.text.toLowerCase()).not.toMatch(/koa|stack|at .*\.js/);
  });
});

describe("every answer's traceresponse, with no span to name (no SDK here)", () => {
  it("is a fresh unsampled W3C id, over more answers than randomUUID's cache holds (128 UUIDs, two per answer)", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 200; i += 1) ids.push((await request(service.baseUrl).get('/health')).headers.traceresponse ?? '');
    for (const id of ids) expect(id).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(new Set(ids.map((id) => id.slice(3, 35))).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(36, 52))).size).toBe(ids.length);
  });
});
