/**
 * The trace pipeline, set up by the preload (telemetry.ts) unless OTEL_SDK_DISABLED=true:
 * - No OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_TRACES_EXPORTER=none):
 *   no span is recorded or exported and nothing is said about a missing collector; an incoming
 *   `traceparent` still reaches the log lines (trace_id/span_id) of the request it came with.
 * - With an endpoint: spans are batched and exported over OTLP (OTEL_EXPORTER_OTLP_PROTOCOL
 *   http/protobuf by default, http/json or grpc), with OTEL_EXPORTER_OTLP_HEADERS/TIMEOUT/
 *   COMPRESSION read by the exporter, OTEL_BSP_* by the batch processor, OTEL_TRACES_SAMPLER(_ARG)
 *   for sampling, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES for the resource.
 *
 * This composes the SDK's parts (the same ones @opentelemetry/sdk-node builds) instead of loading
 * sdk-node, which requires every metrics, logs and trace exporter it might use: ~200 ms of
 * start-up for code this service never runs (figures in README, "Performance").
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { containerDetector } from '@opentelemetry/resource-detector-container';
import {
  defaultResource,
  detectResources,
  hostDetector,
  processDetector,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
  serviceInstanceIdDetector,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { serviceInfo } from './service-info';
import { CountingSpanExporter, CountingSpanProcessor } from './span-counting';
import { onTelemetryShutdown, telemetryState } from './telemetry-state';

type Env = Readonly<Record<string, string | undefined>>;

function env(name: string, source: Env = process.env): string | undefined {
  const value = source[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** A bad OTEL_* value is reported in one line and replaced by its default, as OpenTelemetry SDKs do. */
function warn(message: string): void {
  process.stderr.write(`product-service: ${message}\n`);
}

export function startTracing(): void {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );

  if (exportsTraces()) {
    const protocol = otlpProtocol();
    const capacity = positiveInteger('OTEL_BSP_MAX_QUEUE_SIZE', 2048);
    const counter: CountingSpanProcessor = new CountingSpanProcessor(
      new BatchSpanProcessor({
        // The exporter (and protobuf with it) is loaded at the first export, not at start-up.
        exporter: new CountingSpanExporter(() => createOtlpExporter(protocol), (count) => counter.takenFromQueue(count)),
        maxQueueSize: capacity,
        maxExportBatchSize: Math.min(capacity, positiveInteger('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512)),
        scheduledDelayMillis: positiveInteger('OTEL_BSP_SCHEDULE_DELAY', 5000),
        exportTimeoutMillis: positiveInteger('OTEL_BSP_EXPORT_TIMEOUT', 30000),
      }),
      capacity,
    );
    const provider = new TracerProvider({ resource: createResource(), sampler: createSampler(), spanProcessors: [counter] });
    trace.setGlobalTracerProvider(provider);
    onTelemetryShutdown(() => provider.shutdown());
  }

  // Nothing is patched: the server span of each request is made by the application
  // (src/server-span.ts) and log lines get their trace ids from the logger's mixin (src/logger.ts),
  // both through the OpenTelemetry API, because the instrumentation packages cost more (README,
  // Performance). The service calls nothing, so there is no client side to instrument.
  telemetryState.tracingEnabled = true;
}

function exportsTraces(): boolean {
  const exporters = (env('OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((name) => name.trim().toLowerCase());
  if (exporters.includes('none')) return false;
  if (!exporters.includes('otlp')) warn(`OTEL_TRACES_EXPORTER=${exporters.join(',')} is not supported (otlp or none); using otlp`);
  return env('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined || env('OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined;
}

type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

function otlpProtocol(): OtlpProtocol {
  const protocol = env('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? env('OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  if (protocol === 'http/protobuf' || protocol === 'http/json' || protocol === 'grpc') return protocol;
  warn(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported (http/protobuf, http/json, grpc); using http/protobuf`);
  return 'http/protobuf';
}

/** Only the exporter asked for is loaded; each reads its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*. */
function createOtlpExporter(protocol: OtlpProtocol): SpanExporter {
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded lazily, see above */
  switch (protocol) {
    case 'grpc':
      return new (require('@opentelemetry/exporter-trace-otlp-grpc') as typeof import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
    case 'http/json':
      return new (require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
    case 'http/protobuf':
      return new (require('@opentelemetry/exporter-trace-otlp-proto') as typeof import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  }
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/** service.name defaults to product-service and service.version comes from package.json; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override both. */
function createResource(): ReturnType<typeof defaultResource> {
  const service = serviceInfo();
  return defaultResource()
    .merge(resourceFromAttributes({ 'service.name': service.name, 'service.version': service.version }))
    .merge(
      detectResources({
        detectors: [processDetector, hostDetector, containerDetector, serviceInstanceIdDetector, resourceAttributesEnvDetector, serviceNameEnvDetector],
      }),
    );
}

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, as the specification defines them. */
export function createSampler(source: Env = process.env): Sampler {
  const name = env('OTEL_TRACES_SAMPLER', source)?.toLowerCase() ?? 'parentbased_always_on';
  const ratio = (): number => {
    const raw = env('OTEL_TRACES_SAMPLER_ARG', source);
    const value = raw === undefined ? 1 : Number(raw);
    if (Number.isFinite(value) && value >= 0 && value <= 1) return value;
    warn(`OTEL_TRACES_SAMPLER_ARG=${raw} is not a ratio from 0 to 1; using 1`);
    return 1;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      if (name !== 'parentbased_always_on') warn(`OTEL_TRACES_SAMPLER=${name} is not supported; using parentbased_always_on`);
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function positiveInteger(name: string, fallback: number): number {
  const raw = env(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (Number.isSafeInteger(value) && value > 0) return value;
  warn(`${name}=${raw} is not a positive whole number; using ${fallback}`);
  return fallback;
}

