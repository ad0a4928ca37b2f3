import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { vi } from 'vitest';
import { bytesOf, fields, messages, varintOf } from '../../bench/otlp-protobuf.mjs';

/**
 * A small OTLP/HTTP receiver for tests: what a collector would see, with no collector binary (none
 * is available here). It accepts POST /v1/traces and /v1/logs, protobuf (the exporters' default) or
 * JSON, and flattens every span and log record with its resource.
 */

type AttributeValue = string | number | boolean | null;
type Attributes = Record<string, AttributeValue>;

export type ReceivedSpan = ReturnType<typeof spansOf>[number];
type ReceivedLogRecord = ReturnType<typeof logsOf>[number];

/**
 * - ok: 200 with an empty body (an empty ExportTraceServiceResponse: full success)
 * - error: `errorStatus` (503 by default, a retryable failure; 500 is not retried)
 * - hang: reads the request and never answers, as a collector stuck behind a dead network path
 */
export type ReceiverMode = 'ok' | 'error' | 'hang';

export interface ReceiverOptions {
  /** Where it listens, on a port the OS picks: 127.0.0.1 unless the service runs elsewhere (a container). */
  host?: string;
  errorStatus?: number;
  tls?: { key: string | Buffer; cert: string | Buffer };
}

export type OtlpReceiver = Awaited<ReturnType<typeof startOtlpReceiver>>;

interface ExportRequest {
  contentType: string;
  headers: IncomingHttpHeaders;
  /** When it arrived (performance.now(), ms). */
  receivedAt: number;
  items: number;
}

interface Signal<T> {
  received: T[];
  requests: ExportRequest[];
  decode(request: Message): T[];
}

export async function startOtlpReceiver(mode: ReceiverMode = 'ok', options: ReceiverOptions = {}) {
  const { host = '127.0.0.1', errorStatus = 503, tls } = options;
  const spans: ReceivedSpan[] = [];
  const logs: ReceivedLogRecord[] = [];
  const requests: ExportRequest[] = [];
  const logRequests: ExportRequest[] = [];
  const signals: Record<string, Signal<ReceivedSpan> | Signal<ReceivedLogRecord>> = {
    '/v1/traces': { received: spans, requests, decode: spansOf },
    '/v1/logs': { received: logs, requests: logRequests, decode: logsOf },
  };

  const handle: RequestListener = (req, res) => {
    void readBody(req).then((body) => {
      const signal = req.method === 'POST' ? signals[req.url ?? ''] : undefined;
      if (signal === undefined) {
        res.writeHead(404).end();
        return;
      }
      const contentType = req.headers['content-type'] ?? '';
      const raw = req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
      const json = contentType.startsWith('application/json');
      const decoded = signal.decode(json ? jsonMessage(JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : protobufMessage(raw));
      signal.requests.push({ contentType, headers: req.headers, receivedAt: performance.now(), items: decoded.length });
      (signal.received as unknown[]).push(...decoded);
      if (receiver.mode === 'hang') return;
      if (receiver.mode === 'error') {
        res.writeHead(errorStatus, { 'Content-Type': 'text/plain' }).end('collector unavailable');
        return;
      }
      res.writeHead(200, { 'Content-Type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : undefined);
    });
  };
  const server: Server = tls === undefined ? createServer(handle) : createTlsServer(tls, handle);
  server.listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  const waitFor = <T>(received: T[], matching: () => boolean, what: () => string, timeoutMs: number): Promise<T[]> =>
    vi.waitFor(
      () => {
        if (matching()) return received;
        throw new Error(`${what()} within ${timeoutMs} ms`);
      },
      { timeout: timeoutMs, interval: 20 },
    );
  const receiver = {
    /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces or /v1/logs). */
    url: `${tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    mode,
    /** Spans and log records decoded so far, in arrival order (in every mode: the request was received). */
    spans,
    logs,
    requests,
    logRequests,
    /** Resolves with all spans once `predicate` holds for at least `count` of them; rejects after `timeoutMs`. */
    waitForSpans: (predicate: (span: ReceivedSpan) => boolean, count = 1, timeoutMs = 10_000): Promise<ReceivedSpan[]> =>
      waitFor(
        spans,
        () => spans.filter(predicate).length >= count,
        () => `fewer than ${count} matching spans; received: ${JSON.stringify(spans.map((s) => s.name))}`,
        timeoutMs,
      ),
    waitForLogs: (predicate: (record: ReceivedLogRecord) => boolean, timeoutMs = 10_000): Promise<ReceivedLogRecord[]> =>
      waitFor(
        logs,
        () => logs.some(predicate),
        () => `no matching log record; received: ${JSON.stringify(logs.map((l) => l.body))}`,
        timeoutMs,
      ),
    close: async (): Promise<void> => {
      // Hanging requests would keep close() waiting forever.
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  return receiver;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A message of an export request, in either OTLP/HTTP encoding: protobuf fields are looked up by
 * number (bench/otlp-protobuf.mjs, the reader the benchmark's OTLP sink uses too), OTLP/JSON fields
 * by their camelCase name (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding: ids in
 * hex, int64 as strings, defaults omitted). Absent fields read as protobuf's defaults.
 */
interface Message {
  has(number: number, name: string): boolean;
  /** Lower-case hex, as in a traceparent header and in the log lines; "" when absent. */
  id(number: number, name: string): string;
  string(number: number, name: string): string;
  int(number: number, name: string): number;
  message(number: number, name: string): Message;
  list(number: number, name: string): Message[];
}

function protobufMessage(bytes: Buffer): Message {
  return {
    has: (number) => fields(bytes).some((field) => field.number === number),
    id: (number) => bytesOf(bytes, number).toString('hex'),
    string: (number) => bytesOf(bytes, number).toString('utf8'),
    int: (number) => Number(BigInt.asIntN(64, varintOf(bytes, number))),
    message: (number) => protobufMessage(bytesOf(bytes, number)),
    list: (number) => messages(bytes, number).map(protobufMessage),
  };
}

function jsonMessage(object: Record<string, unknown>): Message {
  return {
    has: (_, name) => name in object,
    id: (_, name) => ((object[name] ?? '') as string).toLowerCase(),
    string: (_, name) => (object[name] ?? '') as string,
    int: (_, name) => Number(object[name] ?? 0),
    message: (_, name) => jsonMessage((object[name] ?? {}) as Record<string, unknown>),
    list: (_, name) => ((object[name] ?? []) as Array<Record<string, unknown>>).map(jsonMessage),
  };
}

/** AnyValue is a oneof: string_value(1), bool_value(2), int_value(3); doubles (fixed64), arrays, maps and bytes are not needed here. */
function anyValue(value: Message): AttributeValue {
  if (value.has(1, 'stringValue')) return value.string(1, 'stringValue');
  if (value.has(2, 'boolValue')) return value.int(2, 'boolValue') !== 0;
  if (value.has(3, 'intValue')) return value.int(3, 'intValue');
  return null;
}

/** The KeyValue{key(1), value(2): AnyValue} fields numbered `number` of `message`. */
function attributesOf(message: Message, number: number): Attributes {
  return Object.fromEntries(message.list(number, 'attributes').map((kv) => [kv.string(1, 'key'), anyValue(kv.message(2, 'value'))]));
}

/**
 * Each span or log record of a request, with its scope's name and its resource. Both nest the same way:
 * ExportTraceServiceRequest.resource_spans(1) and ExportLogsServiceRequest.resource_logs(1)
 *   > {resource(1), scope_spans / scope_logs(2)} > {scope(1): InstrumentationScope{name(1)}, spans / log_records(2)}
 */
function itemsOf<T>(request: Message, [groups, scopes, items]: [string, string, string], item: (m: Message) => T) {
  return request.list(1, groups).flatMap((group) => {
    const resource = attributesOf(group.message(1, 'resource'), 1);
    return group.list(2, scopes).flatMap((scoped) => {
      const scope = scoped.message(1, 'scope').string(1, 'name');
      return scoped.list(2, items).map((m) => ({ ...item(m), scope, resource }));
    });
  });
}

function spansOf(request: Message) {
  return itemsOf(request, ['resourceSpans', 'scopeSpans', 'spans'], (span) => {
    const status = span.message(15, 'status');
    return {
      traceId: span.id(1, 'traceId'),
      spanId: span.id(2, 'spanId'),
      /** "" for a root span. */
      parentSpanId: span.id(4, 'parentSpanId'),
      /** The W3C tracestate the span carries, "" for none. */
      traceState: span.string(3, 'traceState'),
      name: span.string(5, 'name'),
      /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
      kind: span.int(6, 'kind'),
      attributes: attributesOf(span, 9),
      /** Attributes the SDK discarded (span attribute count limit). */
      droppedAttributesCount: span.int(10, 'droppedAttributesCount'),
      /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
      status: { code: status.int(3, 'code'), message: status.string(2, 'message') },
      /** Event{time_unix_nano(1), name(2), attributes(3)}: an exception is `exception` with exception.type, .message and .stacktrace. */
      events: span.list(11, 'events').map((event) => ({ name: event.string(2, 'name'), attributes: attributesOf(event, 3) })),
      /** Link{trace_id(1), span_id(2)}: the span contexts the span is linked to. */
      links: span.list(13, 'links').map((link) => ({ traceId: link.id(1, 'traceId'), spanId: link.id(2, 'spanId') })),
    };
  });
}

function logsOf(request: Message) {
  return itemsOf(request, ['resourceLogs', 'scopeLogs', 'logRecords'], (record) => ({
    /** "" when the record was emitted outside a span. */
    traceId: record.id(9, 'traceId'),
    spanId: record.id(10, 'spanId'),
    severityNumber: record.int(2, 'severityNumber'),
    severityText: record.string(3, 'severityText'),
    /** pino's `msg`. */
    body: anyValue(record.message(5, 'body')),
    attributes: attributesOf(record, 6),
  }));
}
