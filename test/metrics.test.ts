// Runs: src in-process where the answer is what matters, dist/main.js where the real process does.
//
// The Prometheus exposition, plain and OpenMetrics. Process metrics, the real build info and trace
// exemplars exist only in the built service.
import { METHODS } from 'node:http';
import { describe, expect, it } from 'vitest';
import { requestCount, sampleValue, samples, scrape } from './support/exposition';
import { inProcessForSuite, inProcessForTest, type InProcessService } from './support/in-process';
import { parseResponse, rawExchange } from './support/raw-http';
import { REFUSAL_REASONS } from '../src/observability/metrics';
import { exportingServiceForSuite, VERSION } from './support/service-process';

const PLAIN_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
const OPENMETRICS = 'application/openmetrics-text';
// Sub-millisecond buckets, then OpenTelemetry's semantic-convention boundaries.
const DURATION_BUCKETS = [
  ...[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10].map(String),
  '+Inf',
];

const post = (baseUrl: string, path = '/product', init: RequestInit = {}): Promise<Response> =>
  fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', ...init });

describe('counting, in-process', () => {
  // A small body limit, so that a 413 is cheap to provoke.
  const svc = inProcessForSuite({ bodyLimit: 64 });

  it('product_ids_issued_total equals the number of 201 answers, and nothing else increments it', async () => {
    expect(sampleValue(await svc.exposition(), 'product_ids_issued_total')).toBe(0);

    const statuses: number[] = [];
    for (let i = 0; i < 7; i += 1) statuses.push((await post(svc.baseUrl)).status);
    statuses.push((await post(svc.baseUrl, '/product', { body: 'x'.repeat(65) })).status);
    statuses.push((await fetch(`${svc.baseUrl}/product`)).status);
    statuses.push((await fetch(`${svc.baseUrl}/product`, { method: 'PUT', body: '{}' })).status);
    statuses.push((await post(svc.baseUrl, '/products')).status);
    statuses.push((await fetch(`${svc.baseUrl}/health`)).status);
    expect(statuses).toEqual([201, 201, 201, 201, 201, 201, 201, 413, 405, 405, 404, 200]);

    expect(sampleValue(await svc.exposition(), 'product_ids_issued_total')).toBe(7);
  });

  it('http_server_request_duration_seconds: semconv labels and buckets, "unmatched" instead of unknown paths', async () => {
    // A fresh application, so that the counts below are this test's alone.
    const svc = await inProcessForTest();
    await post(svc.baseUrl);
    await fetch(`${svc.baseUrl}/health`);
    await fetch(`${svc.baseUrl}/random-xyz-4711`);
    await post(svc.baseUrl, '/product/random-abc-4712');
    const body = await svc.exposition();

    const counts = samples(body, 'http_server_request_duration_seconds_count');
    expect(counts.length).toBeGreaterThan(0);
    for (const { labels } of counts) {
      expect(Object.keys(labels).sort()).toEqual(['http_request_method', 'http_response_status_code', 'http_route']);
      expect(['/product', '/health', 'unmatched']).toContain(labels.http_route);
    }
    expect(requestCount(body, 'POST', '/product', 201)).toBeGreaterThanOrEqual(1);
    expect(requestCount(body, 'GET', '/health', 200)).toBeGreaterThanOrEqual(1);
    expect(requestCount(body, 'GET', 'unmatched', 404)).toBe(1);
    expect(requestCount(body, 'POST', 'unmatched', 404)).toBe(1);
    // A raw path as a label value would make every scanner's URL a new series.
    expect(body).not.toContain('random-xyz');
    expect(body).not.toContain('random-abc');

    const buckets = samples(body, 'http_server_request_duration_seconds_bucket').filter(
      ({ labels }) => labels.http_route === '/product' && labels.http_response_status_code === '201',
    );
    expect(buckets.map(({ labels }) => labels.le)).toEqual(DURATION_BUCKETS);
  });

  it("records every method outside the semantic conventions' set as _OTHER: every other method Node parses adds one series per route and status, not one each", async () => {
    const svc = await inProcessForTest();
    // CONNECT is refused before the application; the others reach the router (405 on /product).
    for (const method of METHODS.filter((name) => name !== 'CONNECT')) {
      await rawExchange(svc.port, `${method} /product HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    }
    const methods = new Set(samples(await svc.exposition(), 'http_server_request_duration_seconds_count').map(({ labels }) => labels.http_request_method));
    expect([...methods].sort()).toEqual(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'QUERY', 'TRACE', '_OTHER']);
    expect(requestCount(await svc.exposition(), '_OTHER', '/product', 405)).toBe(METHODS.length - 10);
  });

  it('exposes the POST /product series the alert rules divide by at 0 before the first request', async () => {
    // rate() ignores a series' first sample: a 500 series created by the first error would leave
    // that error out of every ratio.
    const svc = await inProcessForTest();
    const body = await svc.exposition();
    for (const status of [201, 500, 499]) expect(requestCount(body, 'POST', '/product', status), String(status)).toBe(0);
    const buckets = samples(body, 'http_server_request_duration_seconds_bucket').filter(({ labels }) => labels.http_response_status_code === '500');
    expect(buckets.map(({ labels }) => labels.le)).toEqual(DURATION_BUCKETS);
    expect(buckets.every(({ value }) => value === 0)).toBe(true);
  });

  it('counts requests the API server refuses before the application, by reason, from 0', async () => {
    const svc = await inProcessForTest();
    const refused = async (reason: string): Promise<number | undefined> =>
      sampleValue(await svc.exposition(), 'product_service_http_requests_refused_total', { reason });
    for (const reason of REFUSAL_REASONS) expect(await refused(reason), reason).toBe(0);
    expect(parseResponse(await rawExchange(svc.port, 'GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n')).status).toBe(400);
    expect(parseResponse(await rawExchange(svc.port, 'BROKEN\r\n\r\n')).status).toBe(400);
    expect(parseResponse(await rawExchange(svc.port, 'GET /health HTTP/3.0\r\nHost: a\r\n\r\n')).status).toBe(505);
    expect(parseResponse(await rawExchange(svc.port, 'POST /product HTTP/1.1\r\nHost: a\r\nExpect: nothing\r\nContent-Length: 2\r\n\r\n')).status).toBe(417);
    expect(await refused('bad_request')).toBe(2);
    expect(await refused('http_version_not_supported')).toBe(1);
    expect(await refused('expectation_failed')).toBe(1);
    expect(samples(await svc.exposition(), 'http_server_request_duration_seconds_count').every(({ value }) => value === 0)).toBe(true);
  });

  it('a scrape that cannot be rendered (the span pipeline unreadable) gets a 500 problem, and the failure is logged', async () => {
    const svc = await inProcessForTest({ spanPipeline: () => Promise.reject(new Error('span pipeline unreadable')) });
    const response = await fetch(svc.metricsUrl);
    expect(response.status).toBe(500);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(svc.logs.find((line) => line.msg === 'failed to render metrics')).toMatchObject({ level: 'error', err: { message: 'span pipeline unreadable' } });
  });
});

describe('queue time: the header QUEUE_TIME_HEADER names, from a peer in QUEUE_TIME_FROM, in-process', () => {
  const queueTime = (from: string, header = 'X-Request-Start') => ({ env: { QUEUE_TIME_HEADER: header, QUEUE_TIME_FROM: from } });
  const QUEUE = 'product_service_http_request_queue_seconds';
  async function observed(svc: InProcessService, header: string): Promise<{ seconds: number; queued: number | undefined }> {
    const read = async (name: string, labels: Record<string, string> = {}) => {
      const body = await svc.exposition();
      return { count: sampleValue(body, `${name}_count`, labels) ?? 0, sum: sampleValue(body, `${name}_sum`, labels) ?? 0 };
    };
    const labels = { http_request_method: 'POST', http_route: '/product', http_response_status_code: '201' };
    const [before, queueBefore] = [await read('http_server_request_duration_seconds', labels), await read(QUEUE)];
    expect((await post(svc.baseUrl, '/product', { headers: { 'x-request-start': header } })).status).toBe(201);
    const [after, queueAfter] = [await read('http_server_request_duration_seconds', labels), await read(QUEUE)];
    expect(after.count - before.count).toBe(1);
    const queued = queueAfter.count - queueBefore.count === 1 ? queueAfter.sum - queueBefore.sum : undefined;
    return { seconds: after.sum - before.sum, queued };
  }
  const ago = (ms: number): number => Date.now() - ms;

  // The test client connects from 127.0.0.1.
  it.each([
    ['nginx: t=${msec}, seconds with milliseconds', () => `t=${(ago(300) / 1000).toFixed(3)}`],
    ['Heroku: milliseconds, no t=', () => String(ago(300))],
    ['Apache %t: t= and microseconds', () => `t=${ago(300) * 1000}`],
    ['t= and nanoseconds', () => `t=${BigInt(ago(300)) * 1_000_000n}`],
  ])('%s, 300 ms ago: the request is observed as at least 0.3 s, and its queue time too', async (_form, header) => {
    const svc = await inProcessForTest(queueTime('10.0.0.0/8,127.0.0.1'));
    const { seconds, queued } = await observed(svc, header());
    expect(seconds).toBeGreaterThanOrEqual(0.3);
    expect(queued).toBeGreaterThanOrEqual(0.3);
    expect(queued).toBeLessThanOrEqual(seconds);
  });

  it("ignores it from a peer outside QUEUE_TIME_FROM (whatever TRUSTED_PROXIES says), under another name, and when it is in the future, over a minute old (the issue's 3,500 s) or malformed", async () => {
    const untrusted = await inProcessForTest({ env: { ...queueTime('10.0.0.0/8').env, TRUSTED_PROXIES: '127.0.0.1', TRACE_CONTEXT_FROM: '127.0.0.1' } });
    const otherHeader = await inProcessForTest(queueTime('127.0.0.1', 'X-Queue-Start'));
    const unnamed = await inProcessForTest({ env: { TRUSTED_PROXIES: '127.0.0.1' } });
    const trusted = await inProcessForTest(queueTime('127.0.0.1'));
    // Were any of them believed, the request would read 10 s (or an hour) long, or negative.
    const cases: Array<[InProcessService, string]> = [
      [untrusted, `t=${(ago(10_000) / 1000).toFixed(3)}`],
      [otherHeader, `t=${(ago(10_000) / 1000).toFixed(3)}`],
      [unnamed, `t=${(ago(10_000) / 1000).toFixed(3)}`],
      [trusted, `t=${(ago(-10_000) / 1000).toFixed(3)}`],
      [trusted, `t=${(ago(3500_000) / 1000).toFixed(3)}`],
      [trusted, `t=${(ago(61_000) / 1000).toFixed(3)}`],
      [trusted, 't=soon'],
      [trusted, `t=${ago(10_000)}, t=${ago(10_000)}`],
    ];
    for (const [svc, header] of cases) {
      const { seconds, queued } = await observed(svc, header);
      expect(queued, header).toBeUndefined();
      expect(seconds, header).toBeGreaterThanOrEqual(0);
      expect(seconds, header).toBeLessThan(5);
    }
  });
});

describe('the built service', () => {
  // The traceparent the test client sends is believed.
  const shared = exportingServiceForSuite({ TRACE_CONTEXT_FROM: '127.0.0.1' });

  it('serves /metrics on the metrics port only', async () => {
    const onApiPort = await fetch(`${shared.svc.baseUrl}/metrics`);
    const otherPath = await fetch(`http://127.0.0.1:${shared.svc.metricsPort}/metricsx`);
    const wrongMethod = await fetch(shared.svc.metricsUrl, { method: 'POST', body: '' });
    for (const [response, status] of [
      [onApiPort, 404],
      [otherPath, 404],
      [wrongMethod, 405],
    ] as const) {
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(await response.json()).toMatchObject({ status });
    }
    expect(wrongMethod.headers.get('allow')).toBe('GET, HEAD');

    const head = await fetch(shared.svc.metricsUrl, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');

    const scraped = await fetch(shared.svc.metricsUrl);
    expect(scraped.status).toBe(200);
    for (const response of [otherPath, wrongMethod, head, scraped]) {
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('includes process and Node.js metrics and the build info', async () => {
    // prom-client measures the event-loop lag after a scrape's answer, for the next one: a process's
    // first scrape reads 0, so this test passed only after another had scraped.
    await scrape(shared.svc.metricsUrl);
    const body = await scrape(shared.svc.metricsUrl);
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_limit_bytes']) {
      expect(sampleValue(body, name), name).toBeGreaterThan(0);
    }
    // The heap alert's denominator: V8's limit, above what the heap uses now.
    expect(sampleValue(body, 'nodejs_heap_size_limit_bytes')).toBeGreaterThan(sampleValue(body, 'nodejs_heap_size_used_bytes') ?? Infinity);
    // Seconds, not milliseconds: active and idle together at most the time the process has run
    // (process_start_time_seconds is rounded to the second).
    const [active = NaN, idle = NaN] = ['active', 'idle'].map((state) =>
      sampleValue(body, 'nodejs_eventloop_time_seconds_total', { nodejs_eventloop_state: state }),
    );
    expect(active).toBeGreaterThan(0);
    expect(idle).toBeGreaterThan(0);
    expect(active + idle).toBeLessThanOrEqual(Date.now() / 1000 - (sampleValue(body, 'process_start_time_seconds') ?? NaN) + 1);
    expect(body).toMatch(/^# TYPE nodejs_gc_duration_seconds histogram$/m);
    const [buildInfo, ...more] = samples(body, 'product_service_build_info');
    expect(more).toEqual([]);
    expect(buildInfo?.labels).toMatchObject({ version: VERSION, nodejs_version: process.version });
    expect(buildInfo?.labels.revision).toBeTruthy();
    expect(buildInfo?.value).toBe(1);
  });

  it('samples the event-loop delay every millisecond, so an idle process reads about 1 ms, not 10', async () => {
    // Node's delay histogram records whole sampling intervals, and prom-client resets it at each
    // scrape: the second scrape reads the idle second in between.
    await scrape(shared.svc.metricsUrl);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const p50 = sampleValue(await scrape(shared.svc.metricsUrl), 'nodejs_eventloop_lag_p50_seconds') ?? Infinity;
    expect(p50).toBeGreaterThanOrEqual(0.001);
    expect(p50).toBeLessThan(0.005);
  });

  it('answers plain Prometheus text by default: no exemplars, no # EOF', async () => {
    await post(shared.svc.baseUrl, '/product', { headers: { 'content-type': 'application/json', traceparent: `00-${'a1'.repeat(16)}-${'b2'.repeat(8)}-01` } });
    const response = await fetch(shared.svc.metricsUrl);
    expect(response.headers.get('content-type')).toBe(PLAIN_TEXT);
    const body = await response.text();
    expect(body).not.toContain('# EOF');
    expect(body).not.toContain('trace_id');
    expect(body).not.toMatch(/ # \{/);
    expect(sampleValue(body, 'product_ids_issued_total')).toBeGreaterThan(0);
  });

  it('answers OpenMetrics with trace exemplars when asked, and plain text still has counters afterwards', async () => {
    const traceId = '5e1f0c2a9b8d7e6f5a4b3c2d1e0f9a8b';
    const answer = await post(shared.svc.baseUrl, '/product', {
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${'c3'.repeat(8)}-01` },
    });
    expect(answer.status).toBe(201);
    await shared.collector.waitForSpans((span) => span.traceId === traceId);

    const response = await fetch(shared.svc.metricsUrl, { headers: { accept: `${OPENMETRICS}; version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1` } });
    expect(response.headers.get('content-type')).toMatch(/^application\/openmetrics-text; version=1\.0\.0/);
    const body = await response.text();
    expect(body.endsWith('# EOF\n')).toBe(true);
    const withExemplar = samples(body, 'http_server_request_duration_seconds_bucket').filter(
      ({ labels, rest }) => labels.http_route === '/product' && rest.includes(`# {trace_id="${traceId}"}`),
    );
    expect(withExemplar).toHaveLength(1);
    expect(withExemplar[0]?.rest).toMatch(/^ # \{trace_id="[0-9a-f]{32}"\} \d+(\.\d+)?(e-?\d+)? \d+(\.\d+)?$/);
    expect(body).toMatch(/^product_ids_issued_total \d+$/m);

    // prom-client renames counters while it writes OpenMetrics; a plain scrape must not see that.
    const after = await scrape(shared.svc.metricsUrl);
    expect(sampleValue(after, 'product_ids_issued_total')).toBeGreaterThan(0);
    expect(after).toMatch(/^# TYPE product_ids_issued_total counter$/m);
    expect(after).toMatch(/^# TYPE process_cpu_seconds_total counter$/m);
    expect(after).not.toContain('# EOF');
  });
});
