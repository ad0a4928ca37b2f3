import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { vi } from 'vitest';
import { bytesOf, fields, messages, varintOf } from '../../bench/otlp-protobuf.mjs';

/**
 * A small OTLP/HTTP receiver for tests: what a collector would see, with no collector binary (none
 * is available here). It accepts POST /v1/traces and POST /v1/logs in both OTLP/HTTP encodings,
 * protobuf (the exporters' default) and JSON, and flattens every span and log record with its
 * resource. Over plain HTTP, or over HTTPS with the certificate a test gives it.
 */

type AttributeValue = string | number | boolean | null;
type Attributes = Record<string, AttributeValue>;

/** What the receiver makes of a span, whichever the encoding (the shape spansFromProtobuf builds). */
export type ReceivedSpan = ReturnType<typeof spansFromProtobuf>[number];
type ReceivedLogRecord = ReturnType<typeof logsFromProtobuf>[number];

/**
 * - ok: 200 with an empty body (an empty ExportTraceServiceResponse: full success)
 * - error: `errorStatus` (503 by default, a retryable failure; 500 is not retried)
 * - hang: reads the request and never answers, as a collector stuck behind a dead network path
 */
export type ReceiverMode = 'ok' | 'error' | 'hang';

export interface ReceiverOptions {
  /** 0 (the default) lets the OS choose; 4318 is OTLP/HTTP's default port. */
  port?: number;
  /** 127.0.0.1 by default. */
  host?: string;
  /** The status of every answer in 'error' mode; 503 by default. */
  errorStatus?: number;
  /** Serve HTTPS with this key and certificate (PEM) instead of plain HTTP. */
  tls?: { key: string | Buffer; cert: string | Buffer };
}

export type OtlpReceiver = Awaited<ReturnType<typeof startOtlpReceiver>>;

/** One export request, as received. */
interface ExportRequest {
  contentType: string;
  headers: IncomingHttpHeaders;
  /** When it arrived (performance.now(), ms). */
  receivedAt: number;
  /** How many spans or log records it carried. */
  items: number;
}

/** What each signal's path records and how its two encodings decode. */
interface Signal<T> {
  received: T[];
  requests: ExportRequest[];
  fromJson(body: Buffer): T[];
  fromProtobuf(body: Buffer): T[];
}

export async function startOtlpReceiver(mode: ReceiverMode = 'ok', options: ReceiverOptions = {}) {
  const { port: wantedPort = 0, host = '127.0.0.1', errorStatus = 503, tls } = options;
  const spans: ReceivedSpan[] = [];
  const logs: ReceivedLogRecord[] = [];
  const requests: ExportRequest[] = [];
  const logRequests: ExportRequest[] = [];
  const signals: Record<string, Signal<ReceivedSpan> | Signal<ReceivedLogRecord>> = {
    '/v1/traces': { received: spans, requests, fromJson: spansFromJson, fromProtobuf: spansFromProtobuf },
    '/v1/logs': { received: logs, requests: logRequests, fromJson: logsFromJson, fromProtobuf: logsFromProtobuf },
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
      const decoded = contentType.startsWith('application/json') ? signal.fromJson(raw) : signal.fromProtobuf(raw);
      signal.requests.push({ contentType, headers: req.headers, receivedAt: performance.now(), items: decoded.length });
      (signal.received as unknown[]).push(...decoded);
      if (receiver.mode === 'hang') return;
      if (receiver.mode === 'error') {
        res.writeHead(errorStatus, { 'Content-Type': 'text/plain' }).end('collector unavailable');
        return;
      }
      res.writeHead(200, { 'Content-Type': contentType.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' });
      res.end(contentType.startsWith('application/json') ? '{}' : undefined);
    });
  };
  const server: Server = tls === undefined ? createServer(handle) : createTlsServer(tls, handle);
  server.listen(wantedPort, host);
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
    /** POST /v1/traces and POST /v1/logs requests received. */
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
    /** Resolves with all log records once `predicate` holds for at least one of them; rejects after `timeoutMs`. */
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

// ---- OTLP JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding) ----

interface JsonKeyValue {
  key: string;
  value?: Record<string, unknown>;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind?: number;
  attributes?: JsonKeyValue[];
  droppedAttributesCount?: number;
  status?: { code?: number; message?: string };
  events?: Array<{ name: string; attributes?: JsonKeyValue[] }>;
}
/** The levels of an OTLP JSON export request: resource groups > scope groups > items (spans or log records). */
interface JsonResourceGroup {
  resource?: { attributes?: JsonKeyValue[] };
  [scopes: string]: unknown;
}
interface JsonScopeGroup {
  scope?: { name?: string };
  [items: string]: unknown;
}

/** Each span or log record of an OTLP JSON request, with its scope's name and its resource; `keys` name the three levels. */
function jsonItems(body: Buffer, [groups, scopes, items]: [string, string, string]): Array<{ item: unknown; scope: string; resource: Attributes }> {
  const request = JSON.parse(body.toString('utf8')) as Record<string, JsonResourceGroup[] | undefined>;
  return (request[groups] ?? []).flatMap((group) => {
    const resource = jsonAttributes(group.resource?.attributes);
    return ((group[scopes] ?? []) as JsonScopeGroup[]).flatMap((scoped) =>
      ((scoped[items] ?? []) as unknown[]).map((item) => ({ item, scope: scoped.scope?.name ?? '', resource })),
    );
  });
}

function spansFromJson(body: Buffer): ReceivedSpan[] {
  return jsonItems(body, ['resourceSpans', 'scopeSpans', 'spans']).map(({ item, scope, resource }) => {
    const span = item as JsonSpan;
    return {
      traceId: span.traceId.toLowerCase(),
      spanId: span.spanId.toLowerCase(),
      parentSpanId: (span.parentSpanId ?? '').toLowerCase(),
      traceState: span.traceState ?? '',
      name: span.name,
      scope,
      kind: span.kind ?? 0,
      attributes: jsonAttributes(span.attributes),
      droppedAttributesCount: span.droppedAttributesCount ?? 0,
      status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
      events: (span.events ?? []).map((event) => ({ name: event.name, attributes: jsonAttributes(event.attributes) })),
      resource,
    };
  });
}

function jsonAttributes(list: JsonKeyValue[] = []): Attributes {
  const attributes: Attributes = {};
  for (const { key, value = {} } of list) {
    // int64 values are strings in OTLP JSON (JavaScript numbers lose precision past 2^53).
    if ('intValue' in value) attributes[key] = Number(value.intValue);
    else if ('stringValue' in value) attributes[key] = String(value.stringValue);
    else if ('boolValue' in value) attributes[key] = Boolean(value.boolValue);
    else if ('doubleValue' in value) attributes[key] = Number(value.doubleValue);
    else attributes[key] = null; // arrays, maps and bytes: not needed by these tests
  }
  return attributes;
}

interface JsonLogRecord {
  traceId?: string;
  spanId?: string;
  severityNumber?: number;
  severityText?: string;
  body?: Record<string, unknown>;
  attributes?: JsonKeyValue[];
}
function logsFromJson(body: Buffer): ReceivedLogRecord[] {
  return jsonItems(body, ['resourceLogs', 'scopeLogs', 'logRecords']).map(({ item, scope, resource }) => {
    const record = item as JsonLogRecord;
    return {
      traceId: (record.traceId ?? '').toLowerCase(),
      spanId: (record.spanId ?? '').toLowerCase(),
      severityNumber: record.severityNumber ?? 0,
      severityText: record.severityText ?? '',
      body: typeof record.body?.stringValue === 'string' ? record.body.stringValue : null,
      scope,
      attributes: jsonAttributes(record.attributes),
      resource,
    };
  });
}

// ---- OTLP protobuf (opentelemetry/proto/collector/{trace,logs}/v1/*_service.proto) ----
// Fields are read by bench/otlp-protobuf.mjs, the reader the benchmark's OTLP sink uses too.

/**
 * Each span or log record of an OTLP protobuf request, with its scope's name and its resource. Both
 * nest the same way: ExportTraceServiceRequest.resource_spans(1) and ExportLogsServiceRequest.resource_logs(1)
 *   > {resource(1), scope_spans / scope_logs(2)} > {scope(1): InstrumentationScope{name(1)}, spans / log_records(2)}
 */
function protobufItems(body: Buffer): Array<{ item: Buffer; scope: string; resource: Attributes }> {
  return messages(body, 1).flatMap((group) => {
    const resource = protobufAttributes(bytesOf(group, 1), 1);
    return messages(group, 2).flatMap((scoped) => {
      const scope = bytesOf(bytesOf(scoped, 1), 1).toString('utf8');
      return messages(scoped, 2).map((item) => ({ item, scope, resource }));
    });
  });
}

function spansFromProtobuf(body: Buffer) {
  return protobufItems(body).map(({ item: span, scope, resource }) => {
    const status = bytesOf(span, 15); // Status{message(2), code(3)}
    return {
      /** Lower-case hex, as in a traceparent header and in the log lines. */
      traceId: bytesOf(span, 1).toString('hex'),
      spanId: bytesOf(span, 2).toString('hex'),
      /** "" for a root span. */
      parentSpanId: bytesOf(span, 4).toString('hex'),
      /** The W3C tracestate the span carries, "" for none. */
      traceState: bytesOf(span, 3).toString('utf8'),
      name: bytesOf(span, 5).toString('utf8'),
      /** The name of the instrumentation scope that created the span, e.g. "@opentelemetry/instrumentation-http". */
      scope,
      /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
      kind: Number(varintOf(span, 6)),
      attributes: protobufAttributes(span, 9),
      /** Attributes the SDK discarded (span attribute count limit). */
      droppedAttributesCount: Number(varintOf(span, 10)),
      /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
      status: { code: Number(varintOf(status, 3)), message: bytesOf(status, 2).toString('utf8') },
      /** Event{time_unix_nano(1), name(2), attributes(3)}: an exception is `exception` with exception.type, .message and .stacktrace. */
      events: messages(span, 11).map((event) => ({ name: bytesOf(event, 2).toString('utf8'), attributes: protobufAttributes(event, 3) })),
      resource,
    };
  });
}

function logsFromProtobuf(body: Buffer) {
  // LogRecord{severity_number(2), severity_text(3), body(5): AnyValue, attributes(6), trace_id(9), span_id(10)}
  return protobufItems(body).map(({ item: record, scope, resource }) => {
    const [bodyValue] = fields(bytesOf(record, 5));
    return {
      /** Lower-case hex; "" when the record was emitted outside a span. */
      traceId: bytesOf(record, 9).toString('hex'),
      spanId: bytesOf(record, 10).toString('hex'),
      severityNumber: Number(varintOf(record, 2)),
      severityText: bytesOf(record, 3).toString('utf8'),
      /** The body when it is a string (pino's `msg`), else null. */
      body: bodyValue?.number === 1 && 'bytes' in bodyValue ? bodyValue.bytes.toString('utf8') : null,
      scope,
      attributes: protobufAttributes(record, 6),
      resource,
    };
  });
}

/** The KeyValue{key(1), value(2): AnyValue} fields numbered `number` of `message`. */
function protobufAttributes(message: Buffer, number: number): Attributes {
  const attributes: Attributes = {};
  for (const keyValue of messages(message, number)) {
    const key = bytesOf(keyValue, 1).toString('utf8');
    // AnyValue is a oneof: string_value(1), bool_value(2), int_value(3, int64), double_value(4, fixed64: not decoded).
    const [value] = fields(bytesOf(keyValue, 2));
    if (value === undefined) attributes[key] = null;
    else if (value.number === 1 && 'bytes' in value) attributes[key] = value.bytes.toString('utf8');
    else if (value.number === 2 && 'varint' in value) attributes[key] = value.varint !== 0n;
    else if (value.number === 3 && 'varint' in value) attributes[key] = Number(BigInt.asIntN(64, value.varint));
    else attributes[key] = null;
  }
  return attributes;
}
