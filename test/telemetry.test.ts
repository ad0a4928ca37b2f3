// Runs: dist/main.js (test/support/service-process.ts; `npm test` builds dist/ first).
//
// Tracing proven end to end: the built service, started as production starts it (`node dist/main.js`),
// exports its spans over OTLP/HTTP to a receiver in this process that decodes them as a collector
// would. Only the entry point starts telemetry, before it requires the service, because the
// instrumentations patch http, koa and pino as they are required: an in-process service has no spans.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { sampleValue, samples, scrape } from './support/exposition';
import { parseResponse, rawExchange } from './support/raw-http';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan, type ReceiverMode, type ReceiverOptions } from './support/otlp-receiver';
import { exportingServiceForSuite, freePort, serviceForTest, VERSION, type ServiceProcess } from './support/service-process';
import { ROOT } from './support/paths';

/** OTLP's SpanKind.SERVER and StatusCode.ERROR. */
const SPAN_KIND_SERVER = 2;
const STATUS_ERROR = 2;
const HTTP_SCOPE = '@opentelemetry/instrumentation-http';
/** One SDK diagnostic on stderr, as src/observability/diagnostics.ts writes it. */
const DIAGNOSTIC_LINE = /^opentelemetry (error|warn|info|debug|verbose): \S/;
const USER_AGENT = 'telemetry-test/1.0';
/** Batches leave every 200 ms instead of every second, so spans reach the receiver within a test. */
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '200' } as const;
/**
 * The test client connects from 127.0.0.1, trusted as a proxy by the services below unless a test
 * says otherwise, so that the trace context it sends is believed ("whose trace context is believed").
 */
const TRUSTED_CLIENT = { TRACE_CONTEXT_FROM: '127.0.0.1' } as const;

interface TraceContext {
  traceId: string;
  parentSpanId: string;
  traceparent: string;
}

function newTraceContext(): TraceContext {
  const traceId = randomBytes(16).toString('hex');
  const parentSpanId = randomBytes(8).toString('hex');
  return { traceId, parentSpanId, traceparent: `00-${traceId}-${parentSpanId}-01` };
}

async function postProduct(
  svc: ServiceProcess,
  headers: Record<string, string> = {},
): Promise<{ status: number; productId: number; traceresponse: string | null }> {
  const response = await fetch(`${svc.baseUrl}/product`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
    body: '{"name":"lamp"}',
  });
  const body = (await response.json()) as { product_id: number };
  return { status: response.status, productId: body.product_id, traceresponse: response.headers.get('traceresponse') };
}

async function load(svc: ServiceProcess, total: number, concurrency = 10): Promise<{ statuses: Record<number, number>; slowestMs: number }> {
  const statuses: Record<number, number> = {};
  let started = 0;
  let slowestMs = 0;
  const worker = async (): Promise<void> => {
    while (started < total) {
      started += 1;
      const begin = performance.now();
      const { status } = await postProduct(svc);
      slowestMs = Math.max(slowestMs, performance.now() - begin);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { statuses, slowestMs };
}

/** The ids an answer's traceresponse header carries (W3C Trace Context Level 2: version-traceid-spanid-flags). */
function traceResponseOf(response: Response): { traceId: string; spanId: string; flags: string } {
  const value = response.headers.get('traceresponse') ?? '';
  const [, traceId = '', spanId = '', flags = ''] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value) ?? [];
  if (traceId === '') throw new Error(`not a traceresponse: ${JSON.stringify(value)}`);
  return { traceId, spanId, flags };
}

/** The completed-request log line of the trace `traceId` (log lines may reach the pipe after the response). */
const requestLogLine = (svc: ServiceProcess, traceId: string): Promise<Record<string, unknown>> =>
  svc.waitForLog((line) => line.msg === 'request completed' && line.trace_id === traceId);

const spansOfTrace = (spans: readonly ReceivedSpan[], traceId: string): ReceivedSpan[] => spans.filter((span) => span.traceId === traceId);

/**
 * Every span exported so far, once a later marker request's span has arrived: spans are exported
 * in order, so "exactly one" or "none" on the result is not a race.
 */
async function spansAfterMarker(svc: ServiceProcess, collector: OtlpReceiver): Promise<ReceivedSpan[]> {
  const marker = newTraceContext();
  await postProduct(svc, { traceparent: marker.traceparent });
  return collector.waitForSpans((span) => span.traceId === marker.traceId);
}

async function onlySpan(collector: OtlpReceiver, matches: (span: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
  const spans = (await collector.waitForSpans(matches)).filter(matches);
  expect(spans).toHaveLength(1);
  return spans[0] as ReceivedSpan;
}
const spanOf = (collector: OtlpReceiver, traceId: string): Promise<ReceivedSpan> => onlySpan(collector, (s) => s.traceId === traceId);
const spanWithUserAgent = (collector: OtlpReceiver, userAgent: string): Promise<ReceivedSpan> =>
  onlySpan(collector, (s) => s.attributes['user_agent.original'] === userAgent);

/** The samples of `metric` by their error_type label ('' for the series without it); {} when the metric is absent. */
function byErrorType(exposition: string, metric: string): Record<string, number> {
  return Object.fromEntries(samples(exposition, metric).map(({ labels, value }) => [labels.error_type ?? '', value]));
}

const sum = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);
const PROCESSED = 'otel_sdk_processor_span_processed_total';
const EXPORTED = 'otel_sdk_exporter_span_exported_total';

/** Scrapes until `check` passes (it throws until then); returns the exposition it passed on. */
function waitForExposition(svc: ServiceProcess, check: (exposition: string) => void, timeout = 15_000): Promise<string> {
  return vi.waitFor(
    async () => {
      const exposition = await scrape(svc.metricsUrl);
      check(exposition);
      return exposition;
    },
    { timeout, interval: 200 },
  );
}

async function receiver(mode: ReceiverMode = 'ok', options: ReceiverOptions = {}): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver(mode, options);
  onTestFinished(() => started.close());
  return started;
}
const service = (env: Record<string, string>): Promise<ServiceProcess> => serviceForTest({ ...TRUSTED_CLIENT, ...env });

async function exporting(env: Record<string, string> = {}): Promise<{ collector: OtlpReceiver; svc: ServiceProcess }> {
  const collector = await receiver();
  return { collector, svc: await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, ...FAST_EXPORT, ...env }) };
}

async function tracedPost(svc: ServiceProcess): Promise<TraceContext> {
  const trace = newTraceContext();
  expect((await postProduct(svc, { traceparent: trace.traceparent })).status).toBe(201);
  return trace;
}

async function oneExportedSpan(env: Record<string, string> = {}): Promise<{ span: ReceivedSpan; svc: ServiceProcess }> {
  const { collector, svc } = await exporting(env);
  return { span: await spanOf(collector, (await tracedPost(svc)).traceId), svc };
}

const sharedExportingService = (env: Record<string, string> = {}): { collector: OtlpReceiver; svc: ServiceProcess } =>
  exportingServiceForSuite({ ...TRUSTED_CLIENT, ...env });

const stdoutMatching = (svc: ServiceProcess, pattern: RegExp | string): Promise<string> =>
  vi.waitFor(
    () => {
      expect(svc.stdout()).toMatch(pattern);
      return svc.stdout();
    },
    { timeout: 10_000, interval: 100 },
  );

const stderrBesidesDiagnostics = (svc: ServiceProcess): string[] =>
  svc
    .stderr()
    .split('\n')
    .filter((line) => line !== '' && !DIAGNOSTIC_LINE.test(line));

/**
 * Preloaded into the service (NODE_OPTIONS --require), records every TCP or pipe connection it opens
 * (node:diagnostics_channel's net.client.socket) in a file: any destination, the SDK's default
 * localhost:4318 included, without listening on a fixed port.
 */
function recordOutgoingConnections(): { env: Record<string, string>; connections: () => string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'outgoing-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const log = join(dir, 'connections.log');
  const preload = join(dir, 'record.js');
  writeFileSync(
    preload,
    `const record = (line) => require('node:fs').appendFileSync(${JSON.stringify(log)}, line + '\\n');
require('node:diagnostics_channel').subscribe('net.client.socket', ({ socket }) => {
  record('a client socket');
  socket.once('connectionAttempt', (ip, port) => record(ip + ':' + port));
});
`,
  );
  return { env: { NODE_OPTIONS: `--require ${preload}` }, connections: () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []) };
}

// Over the default protocol (http/protobuf); test/container/image.test.ts sends each OTLP protocol from the image.
describe('OTLP export', () => {
  const contentType = 'application/x-protobuf';
  const shared = sharedExportingService();

  it(`exports exactly one span per POST /product: SERVER, scope ${HTTP_SCOPE}, named "POST /product", child of the incoming traceparent, with the HTTP server attributes and product.id; sent as ${contentType}`, async () => {
    const { svc, collector } = shared;
    const trace = newTraceContext();
    const { status, productId } = await postProduct(svc, { traceparent: trace.traceparent, tracestate: 'vendor=chosen-by-proxy' });
    expect(status).toBe(201);

    const all = await spansAfterMarker(svc, collector);
    const spans = spansOfTrace(all, trace.traceId);
    expect(spans).toHaveLength(1);
    const [span] = spans as [ReceivedSpan];
    // The test client is a trusted proxy: the span joins its trace, with its tracestate.
    expect(span).toMatchObject({
      scope: HTTP_SCOPE,
      name: 'POST /product',
      kind: SPAN_KIND_SERVER,
      parentSpanId: trace.parentSpanId,
      traceState: 'vendor=chosen-by-proxy',
    });
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(span.spanId).not.toBe(trace.parentSpanId);
    expect(span.status.code).not.toBe(STATUS_ERROR);
    expect(span.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/product',
      'http.response.status_code': 201,
      'url.path': '/product',
      'url.scheme': 'http',
      'server.port': svc.port,
      'client.address': '127.0.0.1',
      'user_agent.original': USER_AGENT,
      'product.id': productId,
    });
    expect(span.resource).toMatchObject({
      'service.name': 'product-service',
      'service.version': VERSION,
      'process.pid': svc.child.pid,
      'host.name': hostname(),
      'os.type': process.platform,
      'telemetry.sdk.language': 'nodejs',
      'telemetry.sdk.name': 'opentelemetry',
    });
    expect(span.resource['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
    // No Koa middleware or router layer spans, and no client spans from the exporter's own requests.
    expect(all.filter((s) => s.scope !== HTTP_SCOPE || s.kind !== SPAN_KIND_SERVER)).toEqual([]);
    expect(collector.requests.length).toBeGreaterThan(0);
    for (const request of collector.requests) expect(request.contentType).toBe(contentType);
  });

  it("puts the server span's trace_id and span_id, and trace_flags 01, on the request's log line and in the answer's traceresponse", async () => {
    const { svc, collector } = shared;
    const trace = newTraceContext();
    const answer = await fetch(`${svc.baseUrl}/product`, { method: 'POST', headers: { traceparent: trace.traceparent }, body: '{}' });
    expect(answer.status).toBe(201);
    const span = await spanOf(collector, trace.traceId);
    expect(traceResponseOf(answer)).toEqual({ traceId: trace.traceId, spanId: span.spanId, flags: '01' });
    expect(await requestLogLine(svc, trace.traceId)).toMatchObject({
      route: '/product',
      status: 201,
      trace_id: trace.traceId,
      span_id: span.spanId,
      trace_flags: '01',
    });
  });

  it('creates no span for GET or HEAD /health nor for the metrics scrape, even with a traceparent', async () => {
    const { svc, collector } = shared;
    for (const path of ['/health', '/health?probe=1', '/HEALTH/']) {
      for (const method of ['GET', 'HEAD']) {
        const response = await fetch(`${svc.baseUrl}${path}`, { method, headers: { traceparent: newTraceContext().traceparent } });
        expect(response.status).toBe(200);
      }
    }
    expect((await fetch(svc.metricsUrl, { headers: { traceparent: newTraceContext().traceparent } })).status).toBe(200);

    const probeSpans = (await spansAfterMarker(svc, collector)).filter(
      (span) =>
        /health|metrics/i.test(span.name) ||
        /health|metrics/i.test(String(span.attributes['url.path'])) ||
        /health|metrics/i.test(String(span.attributes['http.route'])),
    );
    expect(probeSpans).toEqual([]);
  });
});

describe('logs over OTLP (OTEL_LOGS_EXPORTER)', () => {
  const FAST_LOG_EXPORT = { OTEL_BLRP_SCHEDULE_DELAY: '200' } as const;
  /** OpenTelemetry's SeverityNumber INFO, what the pino instrumentation maps level 30 to. */
  const SEVERITY_INFO = 9;

  it.each<{ protocol: string; env: Record<string, string>; contentType: string }>([
    { protocol: 'http/protobuf', env: {}, contentType: 'application/x-protobuf' },
  ])(
    "otlp over $protocol: the request's log line is also a log record with the server span's trace_id and span_id, and still a JSON line on stdout",
    async ({ env, contentType }) => {
      const { collector, svc } = await exporting({ OTEL_LOGS_EXPORTER: 'otlp', ...FAST_LOG_EXPORT, ...env });
      const trace = await tracedPost(svc);
      const span = await spanOf(collector, trace.traceId);

      const records = await collector.waitForLogs((record) => record.traceId === trace.traceId);
      const ofTrace = records.filter((record) => record.traceId === trace.traceId);
      expect(ofTrace).toHaveLength(1);
      expect(ofTrace[0]).toMatchObject({
        body: 'request completed',
        spanId: span.spanId,
        severityNumber: SEVERITY_INFO,
        scope: '@opentelemetry/instrumentation-pino',
        attributes: expect.objectContaining({ method: 'POST', route: '/product', status: 201 }) as unknown,
        resource: expect.objectContaining({ 'service.name': 'product-service', 'service.version': VERSION }) as unknown,
      });
      for (const request of collector.logRequests) expect(request.contentType).toBe(contentType);
      // The line on stdout is unchanged: the record is sent in addition to it.
      expect(await requestLogLine(svc, trace.traceId)).toMatchObject({ route: '/product', status: 201, span_id: span.spanId });
      expect(collector.logs.some((record) => record.body === 'product-service listening' && record.traceId === '')).toBe(true);
    },
  );

  it('by default (unset) sends no log record, even with an endpoint: after a flushed shutdown the receiver got spans and no /v1/logs request', async () => {
    const { collector, svc } = await exporting(FAST_LOG_EXPORT);
    const trace = await tracedPost(svc);
    await requestLogLine(svc, trace.traceId);
    // SIGTERM flushes every provider NodeSDK started: a log record waiting in a batch would be sent now.
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(spansOfTrace(collector.spans, trace.traceId)).toHaveLength(1);
    expect(collector.logRequests).toEqual([]);
    expect(collector.logs).toEqual([]);
  });
});

describe('whose trace context is believed (TRACE_CONTEXT_FROM)', () => {
  async function postWithClientContext(
    svc: ServiceProcess,
    flags: '00' | '01',
  ): Promise<{ trace: TraceContext; userAgent: string; traceresponse: string | null }> {
    const trace = newTraceContext();
    const userAgent = `trust-test/${randomBytes(6).toString('hex')}`;
    const headers = {
      traceparent: trace.traceparent.replace(/-01$/, `-${flags}`),
      tracestate: 'vendor=chosen-by-client',
      baggage: 'user=forged',
      'user-agent': userAgent,
    };
    const { status, traceresponse } = await postProduct(svc, headers);
    expect(status).toBe(201);
    return { trace, userAgent, traceresponse };
  }

  describe('a caller outside TRACE_CONTEXT_FROM (unset, the default), even a proxy TRUSTED_PROXIES names', () => {
    const shared = sharedExportingService({ TRUSTED_PROXIES: '127.0.0.1', TRACE_CONTEXT_FROM: '' });

    it.each(['00', '01'] as const)(
      "traceparent flags %s: the request is traced in a new trace (not the client's) sampled by the service's sampler, with no parent and no tracestate but a link to the client's span, and its log line carries that trace",
      async (flags) => {
        const { svc, collector } = shared;
        const { trace, userAgent } = await postWithClientContext(svc, flags);
        const span = await spanWithUserAgent(collector, userAgent);
        expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
        expect(span.traceId).not.toBe(trace.traceId);
        expect(span).toMatchObject({ parentSpanId: '', traceState: '', name: 'POST /product' });
        expect(span.links).toEqual([{ traceId: trace.traceId, spanId: trace.parentSpanId }]);
        expect(JSON.stringify(span.attributes)).not.toContain('forged');
        expect(await requestLogLine(svc, span.traceId)).toMatchObject({ span_id: span.spanId, trace_flags: '01' });
        expect(svc.logLines().filter((line) => JSON.stringify(line).includes(trace.traceId))).toEqual([]);
      },
    );
  });

  describe('a caller TRACE_CONTEXT_FROM names (127.0.0.1; flags 01: see "OTLP export")', () => {
    const shared = sharedExportingService(TRUSTED_CLIENT);

    it("traceparent flags 00: the default parent-based sampler follows its decision, no span; the traceresponse continues the caller's trace, unsampled", async () => {
      const { svc, collector } = shared;
      const { trace, userAgent, traceresponse } = await postWithClientContext(svc, '00');
      expect(traceresponse).toMatch(new RegExp(`^00-${trace.traceId}-[0-9a-f]{16}-00$`));
      expect((await spansAfterMarker(svc, collector)).filter((span) => span.attributes['user_agent.original'] === userAgent)).toEqual([]);
    });
  });
});

describe("the OpenTelemetry Operator's Node.js injection (an SDK preloaded through NODE_OPTIONS --require)", () => {
  it('only the preloaded SDK runs: one server span per request, none from this service, and one stderr line saying which SDK traces', async () => {
    // Stands in for the operator's autoinstrumentation.js: a NodeSDK with the auto-instrumentations,
    // started before the service; its span processor prints each ended span on stderr.
    const dir = mkdtempSync(join(tmpdir(), 'operator-stand-in-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const standIn = join(dir, 'autoinstrumentation.js');
    const resolve = (name: string): string => JSON.stringify(require.resolve(name, { paths: [ROOT] }));
    writeFileSync(
      standIn,
      `const { NodeSDK } = require(${resolve('@opentelemetry/sdk-node')});
const { getNodeAutoInstrumentations } = require(${resolve('@opentelemetry/auto-instrumentations-node')});
const print = { onStart() {}, onEnd(span) { process.stderr.write('stand-in span: ' + span.name + '\\n'); }, forceFlush: async () => {}, shutdown: async () => {} };
new NodeSDK({ instrumentations: [getNodeAutoInstrumentations()], spanProcessors: [print] }).start();
`,
    );
    const collector = await receiver();
    const svc = await service({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      ...FAST_EXPORT,
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_LOGS_EXPORTER: 'none',
      NODE_OPTIONS: `--require ${standIn}`,
    });
    expect((await postProduct(svc, { traceparent: newTraceContext().traceparent })).status).toBe(201);
    await vi.waitFor(() => expect(svc.stderr()).toMatch(/stand-in span: POST/), { timeout: 10_000 });
    await sleep(1500); // a second SDK's span, or its export, would have come by now
    expect(svc.stderr().match(/stand-in span: POST/g)).toHaveLength(1);
    expect(collector.requests).toEqual([]);
    expect(svc.stderr()).not.toMatch(/duplicate registration/i);
    const said = svc
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('product-service: another OpenTelemetry SDK is running'));
    expect(said).toHaveLength(1);
  });
});

describe('what a span records of a hostile request', () => {
  /** What the client makes up: none of it may reach a span. */
  const FORGED = ['tok_live_51Hx', 'hunter2', 'forged.example', '203.0.113.66', '198.51.100.7'];
  const FORGING_HEADERS = [
    'Host: forged.example:4443',
    'Forwarded: for=203.0.113.66;host=forged.example;proto=https',
    'X-Forwarded-For: 198.51.100.7',
    'X-Forwarded-Host: forged.example',
    'X-Forwarded-Proto: https',
  ];

  async function tracedRequest(
    { svc, collector }: { svc: ServiceProcess; collector: OtlpReceiver },
    method: string,
    target: string,
    headers: string[],
  ): Promise<{ status: number; span: ReceivedSpan }> {
    const userAgent = `hostile-test/${randomBytes(6).toString('hex')}`;
    const head = [`${method} ${target} HTTP/1.1`, ...headers, `User-Agent: ${userAgent}`, 'Content-Length: 0', 'Connection: close'];
    const { status } = parseResponse(await rawExchange(svc.port, `${head.join('\r\n')}\r\n\r\n`));
    return { status, span: await spanWithUserAgent(collector, userAgent) };
  }

  const everythingIn = (span: ReceivedSpan): string => JSON.stringify([span.name, span.attributes, span.resource]);

  describe('with the defaults', () => {
    const shared = sharedExportingService({ TRUSTED_PROXIES: '', TRACE_CONTEXT_FROM: '' });

    it('the query string is REDACTED, names and values; client.address and server.address come from the socket, not from Host, Forwarded or X-Forwarded-*', async () => {
      const { svc } = shared;
      const { status, span } = await tracedRequest(shared, 'POST', '/product?access_token=tok_live_51Hx&password=hunter2&tok_live_51Hx', FORGING_HEADERS);
      expect(status).toBe(201);
      expect(span.attributes).toMatchObject({
        'url.path': '/product',
        'url.query': 'REDACTED&REDACTED&REDACTED',
        'client.address': '127.0.0.1',
        'network.peer.address': '127.0.0.1',
        'server.address': '127.0.0.1',
        'server.port': svc.port,
        'http.route': '/product',
      });
      for (const forged of FORGED) expect(everythingIn(span)).not.toContain(forged);
    });

    it("a scanner's unmatched path is in no attribute (no url.path), the span is named by the method alone, and a 404 is no ERROR", async () => {
      const { status, span } = await tracedRequest(shared, 'GET', '/reset/tok_live_51Hx?password=hunter2', FORGING_HEADERS);
      expect(status).toBe(404);
      expect(span.name).toBe('GET');
      expect(span.attributes['url.path']).toBeUndefined();
      expect(span.attributes['http.route']).toBeUndefined();
      expect(span.attributes['url.query']).toBe('REDACTED');
      expect(span.attributes['http.response.status_code']).toBe(404);
      expect(span.status.code).not.toBe(STATUS_ERROR);
      expect(span.attributes['error.type']).toBeUndefined();
      for (const forged of [...FORGED, '/reset']) expect(everythingIn(span)).not.toContain(forged);
    });

    it('an absolute-form target is traced at the path it is served at (url.path, route, query REDACTED), and the host it names is in no attribute', async () => {
      const { status, span } = await tracedRequest(shared, 'POST', 'http://forged.example/product?tok_live_51Hx', ['Host: x']);
      expect(status).toBe(201);
      expect(span.name).toBe('POST /product');
      expect(span.attributes).toMatchObject({ 'url.path': '/product', 'url.query': 'REDACTED', 'http.route': '/product' });
      for (const forged of FORGED) expect(everythingIn(span)).not.toContain(forged);
    });

    it('an absolute-form probe (GET http://forged.example/health) gets no span, as /health does; a target of another scheme is refused (400) and its span has no url.path', async () => {
      const { svc, collector } = shared;
      const probeAgent = `probe-test/${randomBytes(6).toString('hex')}`;
      const head = ['GET http://forged.example/health HTTP/1.1', 'Host: x', `User-Agent: ${probeAgent}`, 'Connection: close'];
      expect(parseResponse(await rawExchange(svc.port, `${head.join('\r\n')}\r\n\r\n`)).status).toBe(200);
      // Sent after the probe: once its span has arrived, so would the probe's (spans are exported in order).
      const { status, span } = await tracedRequest(shared, 'POST', 'file:///product?tok_live_51Hx', ['Host: x']);
      expect(status).toBe(400);
      expect(span.attributes['url.path']).toBeUndefined();
      expect(span.attributes['http.route']).toBeUndefined();
      expect(everythingIn(span)).not.toContain('tok_live_51Hx');
      expect(collector.spans.filter((s) => s.attributes['user_agent.original'] === probeAgent)).toEqual([]);
    });

    it.each(['GET', 'DELETE'])(
      'a matched path with another method (%s /product: 405) is named and routed by its route, keeps its url.path, and is no ERROR',
      async (method) => {
        const { status, span } = await tracedRequest(shared, method, '/product', ['Host: x']);
        expect(status).toBe(405);
        expect(span.name).toBe(`${method} /product`);
        expect(span.attributes).toMatchObject({ 'url.path': '/product', 'http.route': '/product', 'http.response.status_code': 405 });
        expect(span.status.code).not.toBe(STATUS_ERROR);
        expect(span.attributes['error.type']).toBeUndefined();
      },
    );
  });

  describe('TRACE_QUERY_PARAMS=page,sort', () => {
    const shared = sharedExportingService({ TRACE_QUERY_PARAMS: 'page,sort' });

    it.each(['', 'http://forged.example'])(
      'records those parameters as sent and every other one as REDACTED, in their order (target %j/product?...)',
      async (absolute) => {
        const { span } = await tracedRequest(shared, 'POST', `${absolute}/product?page=2&access_token=tok_live_51Hx&sort=name%20desc&Page=hunter2`, [
          'Host: x',
        ]);
        expect(span.attributes['url.query']).toBe('page=2&REDACTED&sort=name+desc&REDACTED');
        for (const forged of FORGED) expect(everythingIn(span)).not.toContain(forged);
      },
    );
  });

  describe('TRUSTED_PROXIES=127.0.0.0/8,198.51.100.0/24 (the test client connects from 127.0.0.1)', () => {
    const shared = sharedExportingService({ TRUSTED_PROXIES: '127.0.0.0/8,198.51.100.0/24' });

    it.each([
      // The other cases of X-Forwarded-For: test/span-attributes.test.ts, clientAddress.
      { forwardedFor: undefined, client: '127.0.0.1', why: 'no X-Forwarded-For: the proxy itself' },
      {
        forwardedFor: '203.0.113.66, 192.0.2.10, 198.51.100.7',
        client: '192.0.2.10',
        why: 'trusted proxies skipped from the end, what the client wrote ignored',
      },
    ])('X-Forwarded-For: $forwardedFor → client.address $client ($why); Forwarded and Host still ignored', async ({ forwardedFor, client }) => {
      const headers = ['Host: forged.example', 'Forwarded: for=203.0.113.66;host=forged.example'];
      if (forwardedFor !== undefined) headers.push(`X-Forwarded-For: ${forwardedFor}`);
      const { span } = await tracedRequest(shared, 'POST', '/product', headers);
      expect(span.attributes).toMatchObject({ 'client.address': client, 'network.peer.address': '127.0.0.1', 'server.address': '127.0.0.1' });
      expect(everythingIn(span)).not.toContain('forged.example');
    });
  });
});

// The propagators are the SDK's; this proves the bundle carries them (docs/observability.md, "Propagation").
describe('OTEL_PROPAGATORS=b3', () => {
  it('a request with a b3 header continues that trace: the span has its trace id and parent span id, the log line its trace_id', async () => {
    const { collector, svc } = await exporting({ OTEL_PROPAGATORS: 'b3' });
    const trace = newTraceContext();
    expect((await postProduct(svc, { b3: `${trace.traceId}-${trace.parentSpanId}-1` })).status).toBe(201);
    const span = await spanOf(collector, trace.traceId);
    expect(span).toMatchObject({ name: 'POST /product', parentSpanId: trace.parentSpanId });
    expect(await requestLogLine(svc, trace.traceId)).toMatchObject({ trace_id: trace.traceId, span_id: span.spanId });
  });
});

describe('exporters and SDK configuration from the environment', () => {
  it('OTEL_TRACES_EXPORTER=console (no endpoint): the SDK prints each span on stdout (console.dir) with its name, trace id, parent and scope; the JSON log lines still parse', async () => {
    const svc = await service({ OTEL_TRACES_EXPORTER: 'console', ...FAST_EXPORT });
    const trace = await tracedPost(svc);

    const text = await stdoutMatching(svc, `traceId: '${trace.traceId}'`);
    expect(text).toContain("name: 'POST /product'");
    expect(text).toContain(`spanId: '${trace.parentSpanId}'`);
    expect(text).toContain(`name: '${HTTP_SCOPE}'`);
    expect(await requestLogLine(svc, trace.traceId)).toMatchObject({ route: '/product', status: 201 });
    expect(svc.stderr()).toBe('');
  });

  it('OTEL_LOG_LEVEL=debug: SDK diagnostics go to stderr, one line each starting "opentelemetry <level>:", and every stdout line stays JSON', async () => {
    const { collector, svc } = await exporting({ OTEL_LOG_LEVEL: 'debug' });
    const trace = await tracedPost(svc);
    await spanOf(collector, trace.traceId);
    expect(await svc.stop('SIGTERM')).toBe(0);

    expect(svc.stderr()).toMatch(/^opentelemetry debug: /m);
    // A diagnostic that spans lines (an object printed by util.inspect) leaves lines without the prefix.
    expect(stderrBesidesDiagnostics(svc)).toEqual([]);
    expect(svc.logLines().filter((line) => 'raw' in line)).toEqual([]);
  });
});

describe('resource', () => {
  it('takes service.name from OTEL_SERVICE_NAME (over OTEL_RESOURCE_ATTRIBUTES) and adds OTEL_RESOURCE_ATTRIBUTES', async () => {
    const { span } = await oneExportedSpan({
      OTEL_SERVICE_NAME: 'products-eu',
      // OTEL_SERVICE_NAME wins over a service.name given here (OpenTelemetry specification).
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,deployment.environment.name=staging,team=catalog',
    });
    expect(span.resource).toMatchObject({
      'service.name': 'products-eu',
      'service.version': VERSION,
      'deployment.environment.name': 'staging',
      team: 'catalog',
    });
  });
});

describe('configurations that export nothing, or to the default endpoint', () => {
  it("without an endpoint or OTEL_TRACES_EXPORTER (the chart's default): no outgoing connection (while serving or at SIGTERM), nothing on stderr; each answer's traceresponse carries an id of its own (the caller's trace id when it sent one, a span id of this service's), unsampled, on its log lines", async () => {
    const outgoing = recordOutgoingConnections();
    const svc = await service({ ...FAST_EXPORT, LOG_LEVEL: 'debug', ...outgoing.env });
    const trace = newTraceContext();
    const traced = await fetch(`${svc.baseUrl}/product`, { method: 'POST', headers: { traceparent: trace.traceparent }, body: '{}' });
    const untraced = await fetch(`${svc.baseUrl}/product`, { method: 'POST', body: '{}' });
    const notFound = await fetch(`${svc.baseUrl}/nowhere`);
    expect([traced.status, untraced.status, notFound.status]).toEqual([201, 201, 404]);
    const ids = [traced, untraced, notFound].map(traceResponseOf);
    expect(ids[0]?.traceId).toBe(trace.traceId);
    expect(ids[0]?.spanId).not.toBe(trace.parentSpanId);
    expect(new Set(ids.map((id) => id.traceId)).size).toBe(3);
    for (const id of ids) {
      expect(id.flags).toBe('00');
      expect(await requestLogLine(svc, id.traceId)).toMatchObject({ trace_id: id.traceId });
    }
    expect(await notFound.json()).toMatchObject({ status: 404, trace_id: ids[2]?.traceId });

    // A probe (no span) and a request refused before the application get an id all the same, on their (debug) lines.
    const probe = traceResponseOf(await fetch(`${svc.baseUrl}/health`));
    expect(await requestLogLine(svc, probe.traceId)).toMatchObject({ level: 'debug', route: '/health', status: 200 });
    const refused = parseResponse(await rawExchange(svc.port, 'POST /product HTTP/1.1\r\nContent-Length: 0\r\n\r\n'));
    expect(refused.status).toBe(400);
    const refusedId = /^00-([0-9a-f]{32})-[0-9a-f]{16}-00$/.exec(refused.headers.traceresponse ?? '')?.[1];
    expect(JSON.parse(refused.body)).toMatchObject({ status: 400, trace_id: refusedId });
    expect(await svc.waitForLog((line) => line.msg === 'refused a request before the application' && line.trace_id === refusedId)).toMatchObject({
      status: 400,
    });
    expect(sum(byErrorType(await scrape(svc.metricsUrl), PROCESSED))).toBe(0);

    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(outgoing.connections()).toEqual([]);
    expect(svc.stderr()).toBe('');
    expect(JSON.stringify(svc.logLines())).not.toMatch(/otlp|collector|export|4318|ECONNREFUSED/i);
  });

  it("OTEL_SDK_DISABLED=true: requests work, no span is exported, no traceparent is read; each answer's traceresponse is a random id, on its log line", async () => {
    const { collector, svc } = await exporting({ OTEL_SDK_DISABLED: 'true' });
    const caller = newTraceContext();
    const answer = await fetch(`${svc.baseUrl}/product`, { method: 'POST', headers: { traceparent: caller.traceparent }, body: '{}' });
    expect(answer.status).toBe(201);
    const id = traceResponseOf(answer);
    expect(id.traceId).not.toBe(caller.traceId);
    expect(id.flags).toBe('00');
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);
    expect(sum(byErrorType(await scrape(svc.metricsUrl), PROCESSED))).toBe(0);

    // A stop flushes whatever is queued: after it, anything that would ever be exported has been.
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(collector.requests).toHaveLength(0);
    const line = svc.logLines().find((l) => l.msg === 'request completed');
    expect(line).toMatchObject({ route: '/product', status: 201, trace_id: id.traceId });
    expect(line).not.toHaveProperty('span_id');
  });
});

describe("span batches (the service's OTEL_BSP_* defaults)", () => {
  const REQUESTS = 600;

  it('by default a lone span leaves about 200 ms after its request, not five seconds', async () => {
    const collector = await receiver();
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    const trace = newTraceContext();
    const sentAt = performance.now();
    expect((await postProduct(svc, { traceparent: trace.traceparent })).status).toBe(201);
    await spanOf(collector, trace.traceId);
    const waitedMs = (collector.requests[0]?.receivedAt ?? Infinity) - sentAt;
    expect(waitedMs).toBeGreaterThan(100);
    expect(waitedMs).toBeLessThan(800);
    expect(svc.stderr()).toBe('');
  });

  it('by default a batch carries 128 spans at most, however many wait (OTEL_BSP_SCHEDULE_DELAY=5000 lets them)', async () => {
    const { collector, svc } = await exporting({ OTEL_BSP_SCHEDULE_DELAY: '5000' });
    expect((await load(svc, REQUESTS)).statuses).toEqual({ 201: REQUESTS });
    await collector.waitForSpans(() => true, REQUESTS, 15_000);
    expect(Math.max(...collector.requests.map((request) => request.items))).toBe(128);
    expect(svc.stderr()).toBe('');
  });

  it('OTEL_BSP_MAX_EXPORT_BATCH_SIZE=512 and OTEL_BSP_SCHEDULE_DELAY=5000 (the SDK defaults) still apply when set: batches of more than 128 spans', async () => {
    const { collector, svc } = await exporting({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512', OTEL_BSP_SCHEDULE_DELAY: '5000' });

    expect((await load(svc, REQUESTS)).statuses).toEqual({ 201: REQUESTS });
    await collector.waitForSpans(() => true, REQUESTS, 15_000);
    expect(Math.max(...collector.requests.map((request) => request.items))).toBeGreaterThan(128);
    expect(svc.stderr()).toBe('');
  });
});

describe('span pipeline self-metrics', () => {
  const REQUESTS = 200;
  /** Failed exports are counted within a second or two: the exporter gives up after 1 s. */
  const SHORT_TIMEOUT = { ...FAST_EXPORT, OTEL_EXPORTER_OTLP_TIMEOUT: '1000' };

  it('a healthy collector: every span is counted as processed and exported without error_type, the queue empties, its capacity is 2048', async () => {
    const { collector, svc } = await exporting();
    expect((await load(svc, 20)).statuses).toEqual({ 201: 20 });

    const exposition = await waitForExposition(svc, (e) => expect(sampleValue(e, PROCESSED)).toBe(20));
    expect(byErrorType(exposition, PROCESSED)).toEqual({ '': 20, queue_full: 0 });
    expect(byErrorType(exposition, EXPORTED)).toEqual({ '': 20 });
    expect(sampleValue(exposition, 'otel_sdk_processor_span_queue_size')).toBe(0);
    expect(sampleValue(exposition, 'otel_sdk_processor_span_queue_capacity')).toBe(2048);
    expect(collector.spans).toHaveLength(20);
  });

  // The SDK reports the name of the error it met as the error type ("Error", "OTLPExporterError"):
  // any non-empty type other than queue_full is accepted, so that a renamed error class breaks nothing.
  it.each<{ collectorState: string; mode?: ReceiverMode; errorStatus?: number }>([
    { collectorState: 'down (connection refused)' },
    { collectorState: 'hanging (never answers)', mode: 'hang' },
    { collectorState: 'failing with 503 (retried)', mode: 'error', errorStatus: 503 },
  ])(
    `collector $collectorState: ${REQUESTS} requests all get 201 quickly, and every span is counted as failed with the SDK's error type`,
    async ({ mode, errorStatus }) => {
      const collector = mode === undefined ? undefined : await receiver(mode, { errorStatus });
      const endpoint = collector?.url ?? `http://127.0.0.1:${await freePort()}`;
      const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...SHORT_TIMEOUT });

      const result = await load(svc, REQUESTS);
      expect(result.statuses).toEqual({ 201: REQUESTS });
      // Generous bound: a request that waited on the exporter would wait for its 1 s timeout.
      expect(result.slowestMs).toBeLessThan(1000);

      const exposition = await waitForExposition(svc, (e) => expect(sum(byErrorType(e, PROCESSED))).toBe(REQUESTS));
      const processed = byErrorType(exposition, PROCESSED);
      const failures = Object.fromEntries(Object.entries(processed).filter(([type]) => type !== '' && type !== 'queue_full'));
      expect(Object.keys(failures).length, exposition).toBeGreaterThan(0);
      for (const type of Object.keys(failures)) expect(type).toMatch(/^[A-Za-z_][\w.]*$/); // an error's name, not its message
      expect(processed['']).toBe(0);
      expect(byErrorType(exposition, EXPORTED)).toEqual({ '': 0, ...failures });
      if (collector !== undefined) expect(collector.requests.length).toBeGreaterThan(0);
      expect(stderrBesidesDiagnostics(svc)).toEqual([]);
      expect(svc.logLines().filter((line) => 'raw' in line)).toEqual([]);
    },
    60_000,
  );

  it('a hanging collector with OTEL_BSP_MAX_QUEUE_SIZE=16: requests are not slowed, the spans that do not fit are counted as queue_full, the capacity gauge says 16', async () => {
    const collector = await receiver('hang');
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_MAX_QUEUE_SIZE: '16', ...SHORT_TIMEOUT });

    const result = await load(svc, REQUESTS);
    expect(result.statuses).toEqual({ 201: REQUESTS });
    expect(result.slowestMs).toBeLessThan(1000);

    const first = await scrape(svc.metricsUrl);
    expect(sampleValue(first, 'otel_sdk_processor_span_queue_capacity')).toBe(16);
    expect(sampleValue(first, 'otel_sdk_processor_span_queue_size')).toBeLessThanOrEqual(16);
    const exposition = await waitForExposition(svc, (e) => expect(sum(byErrorType(e, PROCESSED))).toBe(REQUESTS));
    expect(sampleValue(exposition, PROCESSED, { error_type: 'queue_full' })).toBeGreaterThan(0);
    expect(sampleValue(exposition, PROCESSED)).toBe(0);
  });
});

// The flush of queued spans on SIGTERM is proven on the image, over each OTLP protocol
// (test/container/image.test.ts, "tracing from the image").
describe('shutdown', () => {
  it.each([
    { collectorState: 'down', mode: undefined },
    { collectorState: 'failing (503)', mode: 'error' as const },
    // Hanging: the test below, which also bounds the wait.
  ])('exits 0 when the collector is $collectorState at shutdown: the spans are lost, not the shutdown', async ({ mode }) => {
    const collector = mode === undefined ? undefined : await receiver(mode);
    const svc = await service({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector?.url ?? `http://127.0.0.1:${await freePort()}`,
      OTEL_BSP_SCHEDULE_DELAY: '30000',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
    });
    expect((await postProduct(svc, { traceparent: newTraceContext().traceparent })).status).toBe(201);

    const code = await svc.stop('SIGTERM');
    const messages = svc.logLines().map((line) => line.msg);
    expect(messages).not.toContain('shutdown failed');
    expect(messages).toContain('shutdown complete');
    expect(code).toBe(0);
  });

  it('waits for a hanging collector no longer than SHUTDOWN_TIMEOUT', async () => {
    const collector = await receiver('hang');
    // The exporter alone would wait 10 s (its default timeout) for the collector's answer.
    const svc = await service({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '30000', SHUTDOWN_TIMEOUT: '1' });
    expect((await postProduct(svc, { traceparent: newTraceContext().traceparent })).status).toBe(201);

    const signalledAt = Date.now();
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(8000);
    expect(collector.requests.length).toBeGreaterThan(0);
    expect(svc.logLines().map((line) => line.msg)).toContain('shutdown complete');
  });
});
