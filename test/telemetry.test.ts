// Tracing proven end to end: the built service, started as production starts it (with the
// telemetry preload), exports its spans over OTLP/HTTP to a receiver in this process that decodes
// them as a collector would. vitest's module loader bypasses the preload's require hooks, so
// none of this can be observed in-process.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver';
import { freePort, ROOT, startService, type ServiceProcess } from './support/service-process';

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const SERVER_KIND = 2;

/** A W3C traceparent with a fixed parent span id and a trace id that differs per call. */
let traceCounter = 0;
function newTraceparent(): { header: string; traceId: string; parentSpanId: string } {
  traceCounter += 1;
  const traceId = `4bf92f3577b34da6a3ce929d${traceCounter.toString(16).padStart(8, '0')}`;
  const parentSpanId = '00f067aa0ba902b7';
  return { header: `00-${traceId}-${parentSpanId}-01`, traceId, parentSpanId };
}

async function postProduct(baseUrl: string, headers: Record<string, string> = {}): Promise<{ status: number; productId: number }> {
  const response = await fetch(`${baseUrl}/product`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{"name":"lamp"}',
  });
  const body = (await response.json()) as { product_id: number };
  return { status: response.status, productId: body.product_id };
}

/** The value of one sample in a Prometheus text exposition (0 when the series is absent). */
function sample(exposition: string, series: string): number {
  const line = exposition.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1).split(' ')[0]);
}

async function scrape(service: ServiceProcess): Promise<string> {
  return (await fetch(service.metricsUrl)).text();
}

/** Polls the metrics until `series` is above zero; returns the last exposition either way. */
async function waitForPositive(service: ServiceProcess, series: string, timeoutMs = 15_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let exposition = await scrape(service);
  while (sample(exposition, series) === 0 && Date.now() < deadline) {
    await sleep(200);
    exposition = await scrape(service);
  }
  return exposition;
}

const serverSpansOf = (spans: ReceivedSpan[], traceId: string): ReceivedSpan[] =>
  spans.filter((span) => span.traceId === traceId && span.kind === SERVER_KIND);

/** Services and receivers started by a test, stopped after it whatever happened. */
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});
async function receiver(mode: 'ok' | 'error' | 'hang' = 'ok'): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver(mode);
  cleanups.push(() => started.close());
  return started;
}
async function service(env: Record<string, string>): Promise<ServiceProcess> {
  const started = await startService(env);
  cleanups.push(() => started.stop('SIGKILL'));
  return started;
}

/** SIGTERM, then the exit code once stdout is fully read ('exit' can come before the last bytes). */
async function terminate(svc: ServiceProcess): Promise<number | string> {
  const closed = once(svc.child, 'close');
  const code = await svc.stop('SIGTERM');
  await closed;
  return code;
}

describe.each<{ protocol: string; env: Record<string, string>; contentType: string }>([
  { protocol: 'http/protobuf (the default)', env: {}, contentType: 'application/x-protobuf' },
  { protocol: 'http/json', env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, contentType: 'application/json' },
])('OTLP export over $protocol', ({ env, contentType }) => {
  let collector: OtlpReceiver;
  let svc: ServiceProcess;
  beforeAll(async () => {
    collector = await startOtlpReceiver('ok');
    svc = await startService({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100', ...env });
  });
  afterAll(async () => {
    await svc.stop('SIGKILL');
    await collector.close();
  });

  it('exports one SERVER span per request, child of the incoming traceparent, with route, status and product id', async () => {
    const parent = newTraceparent();
    const { status, productId } = await postProduct(svc.baseUrl, { traceparent: parent.header });
    expect(status).toBe(201);

    // A second, later request: once its span has arrived, every span of the first one has too
    // (the batch processor exports in order), so "exactly one" below is not a race.
    const marker = newTraceparent();
    await postProduct(svc.baseUrl, { traceparent: marker.header });
    await collector.waitForSpans((span) => span.traceId === marker.traceId);

    const spans = serverSpansOf(collector.spans, parent.traceId);
    expect(spans).toHaveLength(1);
    const [span] = spans as [ReceivedSpan];
    expect(span.parentSpanId).toBe(parent.parentSpanId);
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(span.spanId).not.toBe(parent.parentSpanId);
    expect(span.name).toBe('POST /product');
    expect(span.attributes).toMatchObject({
      'http.route': '/product',
      'http.request.method': 'POST',
      'http.response.status_code': 201,
      'product.id': productId,
      // The other HTTP server span attributes semantic conventions require or recommend.
      'url.scheme': 'http',
      'url.path': '/product',
      'server.port': Number(new URL(svc.baseUrl).port),
      'client.address': '127.0.0.1',
    });
    expect(span.resource).toMatchObject({ 'service.name': 'product-service', 'service.version': VERSION });
    // The protocol asked for is the one used.
    expect(collector.requests.length).toBeGreaterThan(0);
    for (const request of collector.requests) expect(request.contentType).toBe(contentType);
  });

  it("puts the span's trace_id and span_id on the request's log line", async () => {
    const parent = newTraceparent();
    expect((await postProduct(svc.baseUrl, { traceparent: parent.header })).status).toBe(201);
    const [span] = serverSpansOf(await collector.waitForSpans((s) => s.traceId === parent.traceId), parent.traceId);
    const line = await svc.waitForLog((l) => l.msg === 'request completed' && l.trace_id === parent.traceId);
    expect(line).toMatchObject({ route: '/product', status: 201, trace_id: parent.traceId, span_id: span?.spanId });
  });

  it('traces neither the health probe nor the metrics scrape', async () => {
    for (const path of ['/health', '/health?probe=1']) {
      expect((await fetch(`${svc.baseUrl}${path}`)).status).toBe(200);
      expect((await fetch(`${svc.baseUrl}${path}`, { method: 'HEAD' })).status).toBe(200);
    }
    expect((await fetch(svc.metricsUrl)).status).toBe(200);
    expect((await fetch(`${svc.baseUrl}/health`, { method: 'HEAD', headers: { traceparent: newTraceparent().header } })).status).toBe(200);

    const marker = newTraceparent();
    await postProduct(svc.baseUrl, { traceparent: marker.header });
    await collector.waitForSpans((span) => span.traceId === marker.traceId);

    const probeSpans = collector.spans.filter(
      (span) =>
        /health|metrics/i.test(span.name) ||
        ['/health', '/metrics'].includes(String(span.attributes['url.path'])) ||
        ['/health', '/metrics'].includes(String(span.attributes['http.route'])),
    );
    expect(probeSpans).toEqual([]);
  });
});

describe('resource', () => {
  it('takes service.name from OTEL_SERVICE_NAME and adds OTEL_RESOURCE_ATTRIBUTES', async () => {
    const collector = await receiver();
    const svc = await service({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'products-eu',
      // OTEL_SERVICE_NAME wins over a service.name given here (OpenTelemetry specification).
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,deployment.environment.name=staging,team=catalog',
    });
    const parent = newTraceparent();
    await postProduct(svc.baseUrl, { traceparent: parent.header });
    const [span] = serverSpansOf(await collector.waitForSpans((s) => s.traceId === parent.traceId), parent.traceId);
    expect(span?.resource).toMatchObject({
      'service.name': 'products-eu',
      'service.version': VERSION,
      'deployment.environment.name': 'staging',
      team: 'catalog',
    });
  });
});

describe('shutdown', () => {
  it('flushes queued spans on SIGTERM and exits 0', async () => {
    const collector = await receiver();
    // A 30 s schedule: within this test only the shutdown flush can deliver the span.
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '30000' });
    const parent = newTraceparent();
    expect((await postProduct(svc.baseUrl, { traceparent: parent.header })).status).toBe(201);
    expect(collector.requests).toHaveLength(0);

    expect(await terminate(svc)).toBe(0);
    expect(serverSpansOf(collector.spans, parent.traceId)).toHaveLength(1);
    expect(svc.logLines().map((line) => line.msg)).toContain('shutdown complete');
  });

  it.each([
    { collectorState: 'down', mode: undefined },
    { collectorState: 'failing (503)', mode: 'error' as const },
    { collectorState: 'hanging', mode: 'hang' as const },
  ])('exits 0 when the collector is $collectorState at shutdown: the spans are lost, not the shutdown', async ({ mode }) => {
    const collector = mode === undefined ? undefined : await receiver(mode);
    const svc = await service({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector?.url ?? `http://127.0.0.1:${await freePort()}`,
      OTEL_BSP_SCHEDULE_DELAY: '30000',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
    });
    expect((await postProduct(svc.baseUrl, { traceparent: newTraceparent().header })).status).toBe(201);

    const code = await terminate(svc);
    const messages = svc.logLines().map((line) => line.msg);
    expect(messages).not.toContain('shutdown failed');
    expect(messages).toContain('shutdown complete');
    expect(code).toBe(0);
  });

  it('waits for a hanging collector no longer than SHUTDOWN_TIMEOUT', async () => {
    const collector = await receiver('hang');
    // The exporter alone would wait 10 s (its default timeout) for the collector's answer.
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '30000', SHUTDOWN_TIMEOUT: '1' });
    expect((await postProduct(svc.baseUrl, { traceparent: newTraceparent().header })).status).toBe(201);

    const signalledAt = Date.now();
    expect(await terminate(svc)).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(8000);
    expect(collector.requests.length).toBeGreaterThan(0);
    expect(svc.logLines().map((line) => line.msg)).toContain('shutdown complete');
  });
});

/**
 * Sends `total` POST /product requests, `concurrency` at a time on keep-alive connections, and
 * returns the statuses seen and the slowest request's duration. The RSS of `pid` is read after
 * the first `warmup` requests and at the end.
 */
async function load(baseUrl: string, pid: number, total: number, concurrency = 20, warmup = 500) {
  const statuses = new Map<number, number>();
  let started = 0;
  let slowestMs = 0;
  let rssAfterWarmup = 0;
  const worker = async (): Promise<void> => {
    while (started < total) {
      started += 1;
      if (started === warmup) rssAfterWarmup = rssBytes(pid);
      const begin = performance.now();
      const response = await fetch(`${baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      await response.arrayBuffer();
      slowestMs = Math.max(slowestMs, performance.now() - begin);
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { statuses: Object.fromEntries(statuses), slowestMs, rssGrowth: rssBytes(pid) - rssAfterWarmup };
}

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}

describe('an unavailable collector costs requests nothing', () => {
  const REQUESTS = 3000;
  // A small queue, so that dropping spans is observable within a few thousand requests, and a
  // short export timeout, so that failed exports are counted within seconds.
  const pipeline = { OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_BSP_MAX_QUEUE_SIZE: '256', OTEL_EXPORTER_OTLP_TIMEOUT: '1000' };

  it.each([
    // Refused connections and 503s fail an export within milliseconds (or after one retry, by
    // jitter), so whether the queue overflows depends on timing; a hanging export holds the only
    // export slot for its full 1 s timeout while spans keep ending, so the queue must overflow.
    { collectorState: 'down (connection refused)', mode: undefined, mustDrop: false },
    { collectorState: 'hanging (never answers)', mode: 'hang' as const, mustDrop: true },
    { collectorState: 'failing (503)', mode: 'error' as const, mustDrop: false },
  ])(
    `collector $collectorState: ${REQUESTS} requests all get 201 quickly, memory stays bounded, losses are counted`,
    async ({ mode, mustDrop }) => {
      const collector = mode === undefined ? undefined : await receiver(mode);
      const endpoint = collector?.url ?? `http://127.0.0.1:${await freePort()}`;
      const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...pipeline });
      const pid = svc.child.pid ?? 0;

      const result = await load(svc.baseUrl, pid, REQUESTS);
      const summary = JSON.stringify(result);
      expect(result.statuses, summary).toEqual({ 201: REQUESTS });
      // Generous bound: a request that waited on the exporter would wait for its 1 s timeout.
      expect(result.slowestMs, summary).toBeLessThan(1000);
      // Coarse: V8 grows its heap under this allocation rate (measured: 6-10 MB with the SDK
      // disabled, 20-46 MB with the collector down, heap in use staying flat over 40 000 requests),
      // so this catches spans or export requests piling up, not a slow leak.
      expect(result.rssGrowth, summary).toBeLessThan(80 * 1024 * 1024);

      const failed = 'otel_sdk_exporter_span_exported_total{error_type="export_failed"}';
      const exposition = await waitForPositive(svc, failed);
      expect(sample(exposition, failed)).toBeGreaterThan(0);
      expect(sample(exposition, 'otel_sdk_exporter_span_exported_total')).toBe(0);
      // Every request's span is accounted for: queued for export, or dropped because the queue was full.
      const dropped = sample(exposition, 'otel_sdk_processor_span_processed_total{error_type="queue_full"}');
      expect(sample(exposition, 'otel_sdk_processor_span_processed_total') + dropped).toBe(REQUESTS);
      if (mustDrop) expect(dropped).toBeGreaterThan(0);
      expect(sample(exposition, 'otel_sdk_processor_span_queue_capacity')).toBe(256);
      if (collector !== undefined) expect(collector.requests.length).toBeGreaterThan(0);
      expect(svc.stderr()).toBe('');
    },
    60_000,
  );
});

describe('configurations that export nothing', () => {
  it('without an endpoint: nothing is recorded or exported, nothing is said, and a traceparent still reaches the logs', async () => {
    const svc = await service({});
    const parent = newTraceparent();
    expect((await postProduct(svc.baseUrl, { traceparent: parent.header })).status).toBe(201);
    expect((await postProduct(svc.baseUrl)).status).toBe(201);

    // A log line may reach the pipe after the response reaches the client.
    const completed = (): Array<Record<string, unknown>> => svc.logLines().filter((line) => line.msg === 'request completed');
    await svc.waitForLog(() => completed().length >= 2);
    const lines = completed();
    expect(lines).toHaveLength(2);
    expect(lines[0]?.trace_id).toBe(parent.traceId);
    expect(lines[1]).not.toHaveProperty('trace_id');

    const exposition = await scrape(svc);
    expect(sample(exposition, 'otel_sdk_processor_span_processed_total')).toBe(0);
    expect(sample(exposition, 'otel_sdk_exporter_span_exported_total{error_type="export_failed"}')).toBe(0);

    expect(await terminate(svc)).toBe(0);
    expect(svc.stderr()).toBe('');
    const stdout = JSON.stringify(svc.logLines());
    expect(stdout).not.toMatch(/otlp|collector|export|4318|ECONNREFUSED/i);
  });

  it('OTEL_SDK_DISABLED=true: requests work, no span is exported, log lines carry no trace_id', async () => {
    const collector = await receiver();
    const svc = await service({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100' });
    const parent = newTraceparent();
    expect((await postProduct(svc.baseUrl, { traceparent: parent.header })).status).toBe(201);
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);

    // A stop flushes whatever is queued: after it, anything that would ever be exported has been.
    expect(await terminate(svc)).toBe(0);
    expect(collector.requests).toHaveLength(0);
    const line = svc.logLines().find((l) => l.msg === 'request completed');
    expect(line).toMatchObject({ route: '/product', status: 201 });
    expect(line).not.toHaveProperty('trace_id');
    expect(line).not.toHaveProperty('span_id');
  });

  it('OTEL_TRACES_SAMPLER=always_off: requests work, no span is exported', async () => {
    const collector = await receiver();
    const svc = await service({ OTEL_TRACES_SAMPLER: 'always_off', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100' });
    expect((await postProduct(svc.baseUrl, { traceparent: newTraceparent().header })).status).toBe(201);
    expect((await postProduct(svc.baseUrl)).status).toBe(201);

    const exposition = await scrape(svc);
    expect(sample(exposition, 'otel_sdk_processor_span_processed_total')).toBe(0);
    expect(await terminate(svc)).toBe(0);
    expect(collector.requests).toHaveLength(0);
    expect(svc.stderr()).toBe('');
  });
});

describe('span status', () => {
  it('a 4xx answer is not an error span; an unmatched path has no http.route and is named by its method alone', async () => {
    const collector = await receiver('ok');
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100' });
    const parent = newTraceparent();
    const response = await fetch(`${svc.baseUrl}/no-such-path`, { headers: { traceparent: parent.header } });
    expect(response.status).toBe(404);
    const [span] = await collector.waitForSpans((received) => received.traceId === parent.traceId);
    expect(span?.name).toBe('GET');
    expect(span?.attributes['http.response.status_code']).toBe(404);
    expect(span?.attributes['http.route']).toBeUndefined();
    expect(span?.attributes['error.type']).toBeUndefined();
  });
});
