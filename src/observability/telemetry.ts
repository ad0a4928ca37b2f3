/**
 * Tracing, in one place: OpenTelemetry's NodeSDK with the instrumentations of
 * @opentelemetry/auto-instrumentations-node, configured by the standard OTEL_* variables.
 * src/main.ts starts it before anything else is loaded, because the instrumentations patch http, koa
 * and pino as they are required, then hands the returned Telemetry to the service.
 *
 * - What is instrumented: http (the server span of each request, named `METHOD route`, and client
 *   spans for outgoing calls), koa (patched, but with its middleware and router layers ignored
 *   it makes no spans; the route of the server span comes from http/middleware.ts) and pino
 *   (trace_id, span_id and trace_flags in every log line written inside a request). What a server
 *   span records of the request the client sent is the service's to say (span-attributes.ts).
 * - What is exported: traces, when an OTLP endpoint or OTEL_TRACES_EXPORTER is set. Metrics are
 *   served by prom-client on the metrics port. Logs go to stdout, and when OTEL_LOGS_EXPORTER names
 *   an exporter (otlp, console) each line is also sent through it by the pino instrumentation,
 *   with the trace context of the request it was written in.
 * - How it stops: Telemetry.shutdown() flushes queued spans; the graceful shutdown calls it.
 *
 * Every default below is written into the environment only when the variable is unset, so a
 * user's value of any standard variable wins. OTEL_SDK_DISABLED=true loads none of the SDK.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Attributes } from '@opentelemetry/api';
import type { MetricReader } from '@opentelemetry/sdk-metrics';
import type { NodeSDK } from '@opentelemetry/sdk-node';
import { readVariable } from '../config';
import { packageInfo } from '../service-info';
import { stderrDiagLogger } from './diagnostics';

/** What the service gets from telemetry: how to stop it, and the SDK's own counts for /metrics. */
export interface Telemetry {
  /** Flushes queued spans and stops the SDK; resolves at once when nothing was started. */
  shutdown(): Promise<void>;
  /** The span processor's self-metrics, or undefined when the SDK does not report them. */
  readSpanPipeline(): Promise<SpanPipelineCounts | undefined>;
  /**
   * How incoming requests are traced. The service says (service.ts), since only its router and its
   * configuration know which requests are probes, which paths are routes and what may be recorded.
   */
  describeIncomingRequests(requests: IncomingRequests): void;
}

export interface IncomingRequests {
  /** Requests that get no span: probes and scrapes would drown the traces that matter. */
  untraced(request: IncomingMessage): boolean;
  /** Attributes of the server span that replace instrumentation-http's own (span-attributes.ts). */
  spanAttributes(request: IncomingMessage): Attributes;
  /** Whether the request's trace headers are believed: it came from a proxy in TRUSTED_PROXIES. */
  traceContextTrusted(request: IncomingMessage): boolean;
  /** Why the service failed to answer (the status message of a 500's span), if it did (http/middleware.ts). */
  failure(response: ServerResponse): string | undefined;
}

/** What the batch span processor reports about itself (OpenTelemetry's otel.sdk.processor.span.* metrics). */
interface SpanPipelineCounts {
  /** Spans whose processing finished, by error.type: '' exported, 'queue_full' dropped, anything else export failed. */
  readonly processed: ReadonlyMap<string, number>;
  readonly queueSize: number;
  readonly queueCapacity: number;
}

/** The environment startTelemetry reads and writes its defaults into (process.env). */
type WritableEnv = Record<string, string | undefined>;
/** instrumentation-koa's layer types ('middleware', 'router'), a string enum its package exports. */
type KoaLayerTypes = NonNullable<
  NonNullable<
    NonNullable<Parameters<typeof import('@opentelemetry/auto-instrumentations-node').getNodeAutoInstrumentations>[0]>['@opentelemetry/instrumentation-koa']
  >['ignoreLayersType']
>;

/**
 * This service's defaults for standard variables, each applied only when the variable is unset:
 * - only the instrumentations it uses are constructed (every one of the ~40 would be by default);
 * - metrics and logs are not exported over OTLP (prom-client and stdout carry them; a user who
 *   sets OTEL_LOGS_EXPORTER gets the log lines sent as well);
 * - resource detectors that read local facts only: no cloud metadata calls at start-up;
 * - the SDK's self-metrics on, for the dropped and failed span counts on /metrics;
 * - the SDK's warnings on stderr, so that a variable it cannot use as written is reported;
 * - span attribute values capped, so that huge headers (User-Agent) cannot swell the export queue;
 * - span batches of at most 128 every second instead of 512 every 5 s: encoding a batch blocks the
 *   event loop, and a 512-span batch was the largest share of the p99 at half load, for the same
 *   CPU per request (docs/performance.md, "Span batches"). The queue keeps its 2048.
 */
const SERVICE_DEFAULTS: Readonly<Record<string, string>> = {
  OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,koa,pino',
  OTEL_METRICS_EXPORTER: 'none',
  OTEL_LOGS_EXPORTER: 'none',
  OTEL_NODE_RESOURCE_DETECTORS: 'env,host,os,process,serviceinstance,container',
  OTEL_NODE_EXPERIMENTAL_SDK_METRICS: 'true',
  OTEL_LOG_LEVEL: 'warn',
  OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '1024',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '128',
  OTEL_BSP_SCHEDULE_DELAY: '1000',
};

/**
 * Writes SERVICE_DEFAULTS into `env` where unset. A queue set below the default batch size gets a
 * batch of its own size, as the SDK would make it, without the SDK's warning about a default.
 */
function applyServiceDefaults(env: WritableEnv): void {
  const batchSizeUnset = readVariable(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE') === undefined;
  for (const [name, value] of Object.entries(SERVICE_DEFAULTS)) {
    if (readVariable(env, name) === undefined) env[name] = value;
  }
  const queue = Number(readVariable(env, 'OTEL_BSP_MAX_QUEUE_SIZE'));
  if (batchSizeUnset && Number.isInteger(queue) && queue > 0 && queue < Number(SERVICE_DEFAULTS.OTEL_BSP_MAX_EXPORT_BATCH_SIZE)) {
    env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE = String(queue);
  }
}

/**
 * NodeSDK would export to localhost:4318 when nothing is configured. Here, without an endpoint or
 * an exporter named, nothing is exported and no connection is tried.
 */
function exportsTraces(env: WritableEnv): boolean {
  return ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_TRACES_EXPORTER'].some((name) => readVariable(env, name) !== undefined);
}

/** Whether OTEL_LOGS_EXPORTER names an exporter: NodeSDK then builds a LoggerProvider (none wins, as in NodeSDK). */
function exportsLogs(env: WritableEnv): boolean {
  const exporters = (readVariable(env, 'OTEL_LOGS_EXPORTER') ?? '').split(',').map((name) => name.trim());
  return exporters.some((name) => name !== '') && !exporters.includes('none');
}

/**
 * OpenTelemetry drops the whole of OTEL_RESOURCE_ATTRIBUTES, valid entries too, for one malformed
 * entry, and says so only at debug level. Here the malformed entry alone is left out, in one line.
 * The rule is the SDK's: key=value, ',' and '=' percent-encoded, at most 255 characters each.
 */
function keepValidResourceAttributes(env: WritableEnv, warn: (message: string) => void): void {
  const raw = readVariable(env, 'OTEL_RESOURCE_ATTRIBUTES');
  if (raw === undefined) return;
  const valid = raw.split(',').filter((entry) => {
    if (entry.trim() === '') return false;
    const parts = entry.split('=');
    const [key = '', value = ''] = parts.map((part) => part.trim());
    let ok = parts.length === 2 && key !== '';
    try {
      ok &&= decodeURIComponent(key).length <= 255 && decodeURIComponent(value).length <= 255;
    } catch {
      ok = false;
    }
    if (!ok)
      warn(
        `OTEL_RESOURCE_ATTRIBUTES entry ${JSON.stringify(entry)} is not key=value (percent-encode ',' and '=', at most 255 characters): left out, the other entries apply`,
      );
    return ok;
  });
  env.OTEL_RESOURCE_ATTRIBUTES = valid.join(',');
}

const DISABLED: Telemetry = {
  shutdown: () => Promise.resolve(),
  readSpanPipeline: () => Promise.resolve(undefined),
  describeIncomingRequests: () => undefined,
};

/** OTEL_SDK_DISABLED=true: none of the SDK is loaded or started. @public (main.ts requires it, which knip does not follow) */
export function sdkDisabled(env: WritableEnv): boolean {
  return readVariable(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true';
}

/**
 * Whether an OpenTelemetry SDK already registered a tracer provider in this process: one that
 * `NODE_OPTIONS=--require` loaded first, as the OpenTelemetry Operator's Node.js injection does.
 * Read from the API's global slot itself, which every 1.x copy of @opentelemetry/api shares, since
 * that copy's version may be one this one's accessors would not answer for.
 */
function tracerProviderRegistered(): boolean {
  return (globalThis as Record<symbol, { trace?: unknown } | undefined>)[Symbol.for('opentelemetry.js.api.1')]?.trace !== undefined;
}

/** Starts the SDK (unless OTEL_SDK_DISABLED=true). Call once, before koa, pino or http are required. @public */
export function startTelemetry(env: WritableEnv = process.env): Telemetry {
  if (sdkDisabled(env)) return DISABLED;
  // A second SDK would patch http again and fail to register: the one already running stays alone.
  if (tracerProviderRegistered()) {
    const preloaded = [...(env.NODE_OPTIONS ?? '').matchAll(/(?:--require|-r)[= ]\s*(\S+)/g)].map((match) => match[1]).join(', ');
    process.stderr.write(
      `product-service: another OpenTelemetry SDK is running (NODE_OPTIONS requires ${preloaded || 'none'}; the OpenTelemetry Operator's injection does this): it alone traces, with its own settings, and this service's SDK is not started (no probe filtering, span attribute rules or trusted trace context)\n`,
    );
    return DISABLED;
  }
  applyServiceDefaults(env);
  keepValidResourceAttributes(env, (message) => process.stderr.write(`product-service: ${message}\n`));

  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only when telemetry is on (see above) */
  const api = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  const { NodeSDK: Sdk } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const auto = require('@opentelemetry/auto-instrumentations-node') as typeof import('@opentelemetry/auto-instrumentations-node');
  const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
  const metricsSdk = require('@opentelemetry/sdk-metrics') as typeof import('@opentelemetry/sdk-metrics');
  /* eslint-enable @typescript-eslint/no-require-imports */

  // The SDK's diagnostics (OTEL_LOG_LEVEL) would go through console, partly to stdout, where they
  // would break the JSON log stream: they go to stderr, one line each, from the first one on.
  const { diagLogLevelFromString } = require('@opentelemetry/core') as typeof import('@opentelemetry/core'); // eslint-disable-line @typescript-eslint/no-require-imports
  api.diag.setLogger(stderrDiagLogger(), { logLevel: diagLogLevelFromString(env.OTEL_LOG_LEVEL), suppressOverrideMessage: true });

  const service = packageInfo();
  // The SDK's self-metrics reach /metrics through this reader. A user who sets OTEL_METRICS_EXPORTER
  // gets NodeSDK's own readers instead (and the self-metrics there).
  const selfMetrics =
    env.OTEL_METRICS_EXPORTER === 'none'
      ? new (class extends metricsSdk.MetricReader {
          protected onForceFlush(): Promise<void> {
            return Promise.resolve();
          }
          protected onShutdown(): Promise<void> {
            return Promise.resolve();
          }
        })()
      : undefined;
  // Until the service describes its requests, none arrive: it does so before it listens.
  let incoming: IncomingRequests = { untraced: () => false, spanAttributes: () => ({}), traceContextTrusted: () => false, failure: () => undefined };
  // Without an exporter the server span is a non-recording one that drops its attributes: none are computed.
  const tracing = exportsTraces(env);
  const instrumentations = auto.getNodeAutoInstrumentations({
    '@opentelemetry/instrumentation-http': {
      ignoreIncomingRequestHook: (request) => incoming.untraced(request),
      // Its attributes are merged over the instrumentation's own before the span starts. The trace
      // context is extracted right after it: an untrusted client's trace headers (those of the
      // configured propagators) are dropped first, so that its request starts a trace of its own,
      // which the sampler decides on, instead of hiding itself (flags 00), choosing the trace id
      // its log line carries, or having its tracestate and baggage exported.
      startIncomingSpanHook: (request) => {
        if (!incoming.traceContextTrusted(request)) for (const field of api.propagation.fields()) Reflect.deleteProperty(request.headers, field);
        return tracing ? incoming.spanAttributes(request) : {};
      },
      // Called once the instrumentation has set the span's status from the answer's code (with no
      // message), just before the span ends; a client span's response is never a failure's.
      applyCustomAttributesOnSpan: (span, _request, response) => {
        const message = incoming.failure(response as ServerResponse);
        if (message !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message });
      },
    },
    // A span per Koa middleware or router layer would repeat the server span; the app sets the
    // route on it (http/middleware.ts) and the http instrumentation names the span from it.
    // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- KoaLayerType's values; its package is not a direct dependency
    '@opentelemetry/instrumentation-koa': { ignoreLayersType: ['middleware', 'router'] as KoaLayerTypes },
    // Each log line goes to stdout; it is sent through the SDK as well only when a logs exporter is
    // named, since without one the extra pino destination would cost every line for nothing.
    '@opentelemetry/instrumentation-pino': { disableLogSending: !exportsLogs(env) },
  });

  // NodeSDK's constructor installs a console logger (partly on stdout) when it sees OTEL_LOG_LEVEL,
  // replacing one already set: it is hidden from it for that moment, and the stderr logger above
  // stays. Upstream: https://github.com/open-telemetry/opentelemetry-js/issues/4596
  const logLevel = env.OTEL_LOG_LEVEL;
  delete env.OTEL_LOG_LEVEL;
  const sdk: NodeSDK = new Sdk({
    // service.name and service.version of this build; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override them.
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': service.name, 'service.version': service.version } satisfies Attributes)),
    resourceDetectors: auto.getResourceDetectors(),
    instrumentations,
    ...(selfMetrics === undefined ? {} : { metricReaders: [selfMetrics] }),
    // No span processor: no TracerProvider (a span made and dropped costs every request), yet
    // propagation still carries an incoming trace id to the logs and the answer's id.
    ...(tracing ? {} : { spanProcessors: [] }),
  });
  if (logLevel !== undefined) env.OTEL_LOG_LEVEL = logLevel;
  sdk.start();
  if (selfMetrics !== undefined) {
    // NodeSDK hands its MeterProvider to every instrumentation; instrumentation-http would then
    // record http.server.request.duration per request for a reader that only wants the span
    // processor's counts (prom-client keeps the request histogram). They get a no-op meter instead.
    const noMeters = { getMeter: () => api.createNoopMeter() };
    for (const instrumentation of instrumentations) instrumentation.setMeterProvider(noMeters);
  }

  return {
    shutdown: () => sdk.shutdown(),
    readSpanPipeline: () => (selfMetrics === undefined ? Promise.resolve(undefined) : readSpanPipeline(selfMetrics)),
    describeIncomingRequests: (requests) => {
      incoming = requests;
    },
  };
}

async function readSpanPipeline(reader: MetricReader): Promise<SpanPipelineCounts | undefined> {
  const { resourceMetrics } = await reader.collect();
  const processed = new Map<string, number>();
  let queueSize = 0;
  let queueCapacity = 0;
  let seen = false;
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const name = metric.descriptor.name;
      for (const point of metric.dataPoints) {
        const value = typeof point.value === 'number' ? point.value : 0;
        if (name === 'otel.sdk.processor.span.processed') {
          const attribute = point.attributes['error.type'];
          const errorType = typeof attribute === 'string' ? attribute : '';
          processed.set(errorType, (processed.get(errorType) ?? 0) + value);
          seen = true;
        } else if (name === 'otel.sdk.processor.span.queue.size') {
          queueSize += value;
          seen = true;
        } else if (name === 'otel.sdk.processor.span.queue.capacity') {
          queueCapacity += value;
          seen = true;
        }
      }
    }
  }
  return seen ? { processed, queueSize, queueCapacity } : undefined;
}
