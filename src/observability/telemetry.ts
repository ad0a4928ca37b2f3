/**
 * OpenTelemetry's NodeSDK with the http, koa and pino instrumentations, configured by the standard
 * OTEL_* variables. main.ts starts it before anything else is loaded, because the instrumentations
 * patch modules as they are required. Metrics are prom-client's (metrics.ts), logs go to stdout.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Attributes, SpanContext } from '@opentelemetry/api';
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
  /** How incoming requests are traced: only the service's router and configuration know (service.ts). */
  describeIncomingRequests(requests: IncomingRequests): void;
}

export interface IncomingRequests {
  /** Requests that get no span: probes and scrapes would drown the traces that matter. */
  untraced(request: IncomingMessage): boolean;
  /** Attributes of the server span that replace instrumentation-http's own (span-attributes.ts). */
  spanAttributes(request: IncomingMessage): Attributes;
  /** Whether the request's trace headers are believed: it came from a peer in TRACE_CONTEXT_FROM. */
  traceContextTrusted(request: IncomingMessage): boolean;
  /** Why the service failed to answer (the status message of a 500's span), if it did (http/middleware.ts). */
  failure(response: ServerResponse): string | undefined;
}

interface SpanPipelineCounts {
  /** Spans whose processing finished, by error.type: '' exported, 'queue_full' dropped, anything else export failed. */
  readonly processed: ReadonlyMap<string, number>;
  readonly queueSize: number;
  readonly queueCapacity: number;
}

type WritableEnv = Record<string, string | undefined>;
/** instrumentation-koa's layer types ('middleware', 'router'), a string enum its package exports. */
type KoaLayerTypes = NonNullable<
  NonNullable<
    NonNullable<Parameters<typeof import('@opentelemetry/auto-instrumentations-node').getNodeAutoInstrumentations>[0]>['@opentelemetry/instrumentation-koa']
  >['ignoreLayersType']
>;

/**
 * Defaults for standard variables, each applied only when unset, so a user's value wins. Local
 * resource detectors only (no cloud metadata calls at start-up); attribute values capped so huge
 * headers cannot swell the export queue; span batches sent at least every 200 ms, because a span
 * that waits for its batch survives young-generation collections, which copy it, and of at most
 * 128 spans, because the processor sends one batch at a time and smaller ones cannot keep up with a
 * saturated process (docs/performance.md, "Span batches"). NodeSDK reads OTEL_BSP_* for the
 * processor it builds, as here.
 */
const SERVICE_DEFAULTS: Readonly<Record<string, string>> = {
  OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,koa,pino',
  OTEL_METRICS_EXPORTER: 'none',
  // Stryker disable next-line StringLiteral: unset, the SDK builds a log pipeline that stays unused: pino sends it nothing (below)
  OTEL_LOGS_EXPORTER: 'none',
  OTEL_NODE_RESOURCE_DETECTORS: 'env,host,os,process,serviceinstance,container',
  OTEL_NODE_EXPERIMENTAL_SDK_METRICS: 'true',
  OTEL_LOG_LEVEL: 'warn',
  OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '1024',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '128',
  OTEL_BSP_SCHEDULE_DELAY: '200',
};

/** Each OTEL_* variable the environment leaves unset gets the service's default (a queue set below the batch size: the SDK shrinks the batch itself, with a warning). */
function applyServiceDefaults(env: WritableEnv): void {
  for (const [name, value] of Object.entries(SERVICE_DEFAULTS)) {
    if (readVariable(env, name) === undefined) env[name] = value;
  }
}

/** The SDK drops all of OTEL_RESOURCE_ATTRIBUTES for one malformed entry, silently; here only that entry goes, said in one line. */
function keepValidResourceAttributes(env: WritableEnv, warn: (message: string) => void): void {
  const raw = readVariable(env, 'OTEL_RESOURCE_ATTRIBUTES');
  if (raw === undefined) return;
  const valid = raw.split(',').filter((entry) => {
    // Stryker disable next-line BooleanLiteral: the SDK skips an empty entry too
    if (entry.trim() === '') return false;
    const parts = entry.split('=');
    // Stryker disable next-line StringLiteral: split gives a key always, and a value whenever the length check passes
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

/** Starts the SDK (unless OTEL_SDK_DISABLED=true). Call once, before koa, pino or http are required. @public */
export function startTelemetry(env: WritableEnv = process.env): Telemetry {
  if (sdkDisabled(env)) return DISABLED;
  // An SDK that NODE_OPTIONS=--require loaded first (the OpenTelemetry Operator's injection) registered a tracer provider
  // in the global slot every 1.x API copy shares: a second SDK would patch http again and fail to register, so it stays alone.
  if ((globalThis as Record<symbol, { trace?: unknown } | undefined>)[Symbol.for('opentelemetry.js.api.1')]?.trace !== undefined) {
    process.stderr.write(
      `product-service: another OpenTelemetry SDK is running (a --require in NODE_OPTIONS, as the OpenTelemetry Operator's injection does): it alone traces, with its own settings, and this service's SDK is not started (no probe filtering, span attribute rules or trusted trace context)\n`,
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
  const { diagLogLevelFromString } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
  /* eslint-enable @typescript-eslint/no-require-imports */

  // The SDK's diagnostics would go partly to stdout, breaking the JSON log stream.
  api.diag.setLogger(stderrDiagLogger(), { logLevel: diagLogLevelFromString(env.OTEL_LOG_LEVEL), suppressOverrideMessage: true });

  const service = packageInfo();
  // The SDK's self-metrics reach /metrics through this reader, unless OTEL_METRICS_EXPORTER is set.
  const selfMetrics =
    env.OTEL_METRICS_EXPORTER === 'none'
      ? new (class extends metricsSdk.MetricReader {
          // Stryker disable next-line BlockStatement: nothing flushes a reader the service never asks to
          protected onForceFlush(): Promise<void> {
            return Promise.resolve();
          }
          protected onShutdown(): Promise<void> {
            return Promise.resolve();
          }
        })()
      : undefined;
  // Until the service describes its requests, none arrive: it does so before it listens.
  // Stryker disable next-line BooleanLiteral: as no request arrives before, these answers are never asked for
  let incoming: IncomingRequests = { untraced: () => false, spanAttributes: () => ({}), traceContextTrusted: () => false, failure: () => undefined };
  // NodeSDK would export to localhost:4318 when nothing is configured; here nothing is exported then. Without an exporter
  // the server span is a non-recording one that drops its attributes: none are computed.
  const tracing = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_TRACES_EXPORTER'].some(
    (name) => readVariable(env, name) !== undefined,
  );
  const callers = new WeakMap<IncomingMessage, SpanContext>();
  // Stryker disable next-line StringLiteral: applyServiceDefaults has set it
  const logExporters = (readVariable(env, 'OTEL_LOGS_EXPORTER') ?? '').split(',').map((name) => name.trim());
  const instrumentations = auto.getNodeAutoInstrumentations({
    '@opentelemetry/instrumentation-http': {
      ignoreIncomingRequestHook: (request) => incoming.untraced(request),
      // The trace context is extracted right after this hook: an untrusted caller's trace headers
      // are dropped first, so it can neither hide from sampling nor choose its trace id; its context
      // becomes a link of the new root span (OpenTelemetry's answer for public endpoints).
      startIncomingSpanHook: (request) => {
        if (!incoming.traceContextTrusted(request)) {
          const caller = api.trace.getSpanContext(api.propagation.extract(api.ROOT_CONTEXT, request.headers));
          for (const field of api.propagation.fields()) Reflect.deleteProperty(request.headers, field);
          if (tracing && caller !== undefined && api.isSpanContextValid(caller)) callers.set(request, caller);
        }
        return tracing ? incoming.spanAttributes(request) : {};
      },
      requestHook: (span, request) => {
        const caller = callers.get(request as IncomingMessage);
        if (caller !== undefined) span.addLink({ context: caller });
      },
      // Runs after the instrumentation set the status from the code, without a message.
      applyCustomAttributesOnSpan: (span, _request, response) => {
        const message = incoming.failure(response as ServerResponse);
        if (message !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message });
      },
    },
    // A span per Koa layer would repeat the server span, which gets its route from http/middleware.ts.
    // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- KoaLayerType's values; its package is not a direct dependency
    '@opentelemetry/instrumentation-koa': { ignoreLayersType: ['middleware', 'router'] as KoaLayerTypes },
    '@opentelemetry/instrumentation-pino': { disableLogSending: !logExporters.some((name) => name !== '') || logExporters.includes('none') },
  });

  // NodeSDK's constructor replaces the stderr logger when it sees OTEL_LOG_LEVEL.
  // Upstream: https://github.com/open-telemetry/opentelemetry-js/issues/4596
  const logLevel = env.OTEL_LOG_LEVEL;
  delete env.OTEL_LOG_LEVEL;
  const sdk: NodeSDK = new Sdk({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': service.name, 'service.version': service.version } satisfies Attributes)),
    resourceDetectors: auto.getResourceDetectors(),
    instrumentations,
    ...(selfMetrics === undefined ? {} : { metricReaders: [selfMetrics] }),
    // No span processor: no TracerProvider, so no span is made and dropped per request.
    ...(tracing ? {} : { spanProcessors: [] }),
  });
  if (logLevel !== undefined) env.OTEL_LOG_LEVEL = logLevel;
  sdk.start();
  if (selfMetrics !== undefined) {
    // Otherwise instrumentation-http would record a duration per request for a reader that wants only the processor's counts.
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
        } else if (name === 'otel.sdk.processor.span.queue.size') queueSize += value;
        else if (name === 'otel.sdk.processor.span.queue.capacity') queueCapacity += value;
        else continue;
        seen = true;
      }
    }
  }
  return seen ? { processed, queueSize, queueCapacity } : undefined;
}
