// Game-day faults (FAULT_ERROR_RATIO, FAULT_DELAY, src/http/faults.ts): POST /product fails or is
// slowed on purpose, on a real socket, and the failure takes the paths a real one takes (answer,
// histogram, log lines; in the built service also the server span's status and the exemplar).
// GET /health is never faulted, and with no fault set nothing changes.
import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { requestCount, sampleValue, samples, scrape } from './support/exposition';
import { inProcessForTest, type InProcessService } from './support/in-process';
import { exportingServiceForSuite } from './support/service-process';

/** OTLP's StatusCode.ERROR. */
const STATUS_ERROR = 2;
const FAULT_LINE = 'faults injected into POST /product on purpose (FAULT_ERROR_RATIO, FAULT_DELAY): unset them to end the rehearsal';
/** What a real unexpected failure answers (src/http/middleware.ts). */
const FAILURE_ANSWER = {
  type: 'about:blank',
  title: 'Internal Server Error',
  status: 500,
  detail: 'The server failed to answer this request; it has been logged under its trace_id.',
};

const post = (baseUrl: string, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(`${baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{"name":"lamp"}' });

const startWithFaults = (errorRatio: number, delayMs: number): Promise<InProcessService> =>
  inProcessForTest({ faults: { faultErrorRatio: errorRatio, faultDelayMs: delayMs } });

/** The POST /product 201 requests the histogram counts at or under `le` seconds. */
const postsWithin = (exposition: string, le: string): number | undefined =>
  sampleValue(exposition, 'http_server_request_duration_seconds_bucket', {
    http_request_method: 'POST',
    http_route: '/product',
    http_response_status_code: '201',
    le,
  });

describe('faults, in-process', () => {
  it('with no fault set: ids issued at once, the fault gauges at 0', async () => {
    const svc = await inProcessForTest();
    for (let i = 0; i < 20; i += 1) expect((await post(svc.baseUrl)).status).toBe(201);
    const body = await svc.exposition();
    expect(sampleValue(body, 'product_service_fault_error_ratio')).toBe(0);
    expect(sampleValue(body, 'product_service_fault_delay_seconds')).toBe(0);
    expect(sampleValue(body, 'product_ids_issued_total')).toBe(20);
    // Every one of them within the smallest latency bucket the SLO counts as fast.
    expect(postsWithin(body, '0.25')).toBe(20);
  });

  it('FAULT_ERROR_RATIO=1: every POST /product is answered 500 as a real failure, issues no id, and is logged as an error', async () => {
    const svc = await startWithFaults(1, 0);
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const response = await post(svc.baseUrl);
      expect(response.status).toBe(500);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      const traceId = response.headers.get('traceresponse')?.split('-')[1] ?? '';
      expect(await response.json()).toEqual({ ...FAILURE_ANSWER, trace_id: traceId });
      ids.push(traceId);
    }
    const body = await svc.exposition();
    expect(sampleValue(body, 'product_ids_issued_total')).toBe(0);
    expect(requestCount(body, 'POST', '/product', 500)).toBe(5);
    expect(requestCount(body, 'POST', '/product', 201)).toBe(0);
    expect(sampleValue(body, 'product_service_fault_error_ratio')).toBe(1);

    const errors = svc.logs.filter((line) => line.msg === 'unexpected error while serving a request');
    expect(errors).toHaveLength(5);
    expect(errors[0]).toMatchObject({ level: 'error', err: { type: 'InjectedFault', message: 'fault injected on purpose (FAULT_ERROR_RATIO=1)' } });
    // Each error line pairs with its answer and its request line, by the answer's id, under concurrency too.
    expect(errors.map(({ method, route, status, trace_id }) => ({ method, route, status, trace_id }))).toEqual(
      ids.map((trace_id) => ({ method: 'POST', route: '/product', status: 500, trace_id })),
    );
    const completed = svc.logs.filter((line) => line.msg === 'request completed' && line.route === '/product');
    expect(completed.map((line) => [line.status, line.trace_id])).toEqual(ids.map((id) => [500, id]));
  });

  it('GET and HEAD /health are never faulted', async () => {
    const svc = await startWithFaults(1, 60_000);
    const health = await fetch(`${svc.baseUrl}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe('ok');
    expect((await fetch(`${svc.baseUrl}/health`, { method: 'HEAD' })).status).toBe(200);
  });

  it('FAULT_ERROR_RATIO=0.5 fails about half of the requests; every other one gets its id', async () => {
    const svc = await startWithFaults(0.5, 0);
    const statuses: number[] = [];
    for (let i = 0; i < 400; i += 1) statuses.push((await post(svc.baseUrl)).status);
    const failed = statuses.filter((status) => status === 500).length;
    // Binomial(400, 0.5): the mean is 200 and the standard deviation 10; outside 140..260 is a 6-sigma event.
    expect(failed).toBeGreaterThan(140);
    expect(failed).toBeLessThan(260);
    expect(statuses.filter((status) => status === 201)).toHaveLength(400 - failed);
    expect(sampleValue(await svc.exposition(), 'product_ids_issued_total')).toBe(400 - failed);
  });

  it('FAULT_DELAY holds POST /product for the delay while /health answers; the histogram and the request line record it as slow', async () => {
    const svc = await startWithFaults(0, 300);
    const startedAt = Date.now();
    const started = performance.now();
    const order: string[] = [];
    const delayed = post(svc.baseUrl).then(async (response) => {
      order.push('POST /product');
      return { status: response.status, body: (await response.json()) as { product_id?: number }, ms: performance.now() - started };
    });
    const health = fetch(`${svc.baseUrl}/health`).then((response) => {
      order.push('GET /health');
      return response.status;
    });
    const [answer, healthStatus] = await Promise.all([delayed, health]);
    expect(healthStatus).toBe(200);
    expect(order).toEqual(['GET /health', 'POST /product']);
    expect(answer.status).toBe(201);
    expect(Number.isInteger(answer.body.product_id)).toBe(true);
    expect(answer.ms).toBeGreaterThanOrEqual(300);

    const body = await svc.exposition();
    // Past the latency SLO's threshold (0.25 s): the latency alerts see it as a slow request.
    expect(postsWithin(body, '0.25')).toBe(0);
    expect(postsWithin(body, '+Inf')).toBe(1);
    expect(sampleValue(body, 'product_service_fault_delay_seconds')).toBe(0.3);
    // The request line: how long the service held it, and when it was written (ISO-8601, as pino's isoTime).
    const line = svc.logs.find((l) => l.msg === 'request completed' && l.route === '/product');
    expect(line?.duration_ms).toBeGreaterThanOrEqual(300);
    expect(line?.duration_ms).toBeLessThanOrEqual(answer.ms);
    const time = String(line?.time);
    expect(new Date(time).toISOString()).toBe(time);
    expect(Date.parse(time)).toBeGreaterThanOrEqual(startedAt + 300);
    expect(Date.parse(time)).toBeLessThanOrEqual(Date.now());
  });

  it('FAULT_DELAY then FAULT_ERROR_RATIO: a slow failure', async () => {
    const svc = await startWithFaults(1, 200);
    const started = performance.now();
    expect((await post(svc.baseUrl)).status).toBe(500);
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
  });

  it('a caller that gives up during the delay is recorded as 499, gets no id, and holds nothing until the delay would have ended', async () => {
    const svc = await startWithFaults(0, 30_000);
    const gaveUp = fetch(`${svc.baseUrl}/product`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(100) });
    await expect(gaveUp).rejects.toThrow(/aborted/);
    // Well within the 30 s delay: the request ended when its connection did.
    await vi.waitFor(() => expect(svc.logs.some((line) => line.msg === 'request completed' && line.status === 499)).toBe(true), {
      timeout: 5000,
      interval: 20,
    });
    const body = await svc.exposition();
    expect(requestCount(body, 'POST', '/product', 499)).toBe(1);
    expect(sampleValue(body, 'product_ids_issued_total')).toBe(0);
    expect(svc.logs.filter((line) => line.level === 'error')).toEqual([]);
  });
});

describe('faults in the built service', () => {
  // The traceparent the test client sends is believed.
  const shared = exportingServiceForSuite({ FAULT_ERROR_RATIO: '1', FAULT_DELAY: '0.1', TRACE_CONTEXT_FROM: '127.0.0.1' });

  it('says so at start, in one warn line, and on /metrics', async () => {
    const line = await shared.svc.waitForLog((l) => l.msg === FAULT_LINE);
    expect(line).toMatchObject({ level: 'warn', fault_error_ratio: 1, fault_delay_ms: 100 });
    const body = await scrape(shared.svc.metricsUrl);
    expect(sampleValue(body, 'product_service_fault_error_ratio')).toBe(1);
    expect(sampleValue(body, 'product_service_fault_delay_seconds')).toBe(0.1);
  });

  it('an injected failure looks like a real one: error span, exemplar on the 500 bucket, log lines with its trace_id', async () => {
    const traceId = randomBytes(16).toString('hex');
    const response = await post(shared.svc.baseUrl, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` });
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ ...FAILURE_ANSWER, trace_id: traceId });

    const [span] = (await shared.collector.waitForSpans((s) => s.traceId === traceId)).filter((s) => s.traceId === traceId);
    const message = 'fault injected on purpose (FAULT_ERROR_RATIO=1)';
    expect(span).toMatchObject({ name: 'POST /product', status: { code: STATUS_ERROR, message: `InjectedFault: ${message}` } });
    expect(span?.attributes).toMatchObject({ 'http.route': '/product', 'http.response.status_code': 500 });
    expect(span?.attributes['product.id']).toBeUndefined();
    expect(span?.events).toEqual([
      {
        name: 'exception',
        attributes: { 'exception.type': 'InjectedFault', 'exception.message': message, 'exception.stacktrace': expect.stringContaining(message) as unknown },
      },
    ]);
    expect(response.headers.get('traceresponse')).toBe(`00-${traceId}-${span?.spanId ?? ''}-01`);

    const openMetrics = await (await fetch(shared.svc.metricsUrl, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } })).text();
    const exemplars = samples(openMetrics, 'http_server_request_duration_seconds_bucket').filter(
      ({ labels, rest }) => labels.http_response_status_code === '500' && rest.includes(`# {trace_id="${traceId}"}`),
    );
    expect(exemplars).toHaveLength(1);

    const lines = await vi.waitFor(
      () => {
        const mine = shared.svc.logLines().filter((l) => l.trace_id === traceId);
        expect(mine.map((l) => l.msg)).toEqual(['unexpected error while serving a request', 'request completed']);
        return mine;
      },
      { timeout: 5000, interval: 20 },
    );
    expect(lines[0]).toMatchObject({ level: 'error', err: { type: 'InjectedFault' }, method: 'POST', route: '/product', status: 500, span_id: span?.spanId });
    expect(lines[1]).toMatchObject({ level: 'info', route: '/product', status: 500 });
  });
});
