import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type LabelValues, type RegistryContentType } from 'prom-client';
import type { Config, Faults } from '../config';
import type { ServiceInfo } from '../service-info';
import { fromPeers } from './span-attributes';
import type { Telemetry } from './telemetry';

/** A fixed route label for unmatched requests: the raw path would make a series per path. */
export const UNMATCHED_ROUTE = 'unmatched';

/** OpenTelemetry's semantic-convention boundaries, with sub-millisecond ones below them: the service answers that fast. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/** Created at 0: rate() needs a sample before a series' first increase, or a new pod's first errors are lost to the alert ratios. */
const INITIAL_REQUEST_SERIES = [201, 500, 499].map((status) => ({ http_request_method: 'POST', http_route: '/product', http_response_status_code: status }));

const NO_EXEMPLAR = Object.freeze({});

/** The HTTP semantic conventions' methods; any other of the 34 Node parses is `_OTHER`, as in the spans, so a client cannot add series. */
const KNOWN_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'QUERY', 'TRACE']);

export type Metrics = Readonly<ReturnType<typeof createMetrics>>;

/** Why the API server turned a request away before the application: the label of product_service_http_requests_refused_total. */
export const REFUSAL_REASONS = [
  'bad_request',
  'connect',
  'expectation_failed',
  'headers_too_large',
  'http_version_not_supported',
  'request_timeout',
  'pipelining_limit',
  'connection_limit',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface MetricsOptions {
  service: ServiceInfo;
  /** Node process metrics (CPU, memory, event loop, GC). Off in tests that build many apps. */
  processMetrics: boolean;
  spanPipeline?: Telemetry['readSpanPipeline'];
  faults?: Faults;
  queueTime?: Config['queueTime'];
}

export function createMetrics(options: MetricsOptions) {
  const registry = new Registry<RegistryContentType>();
  // Exemplar-carrying metrics join only an OpenMetrics registry; render picks the format per scrape.
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);

  const productIdsIssued = new Counter({
    name: 'product_ids_issued_total',
    help: 'Product ids issued (the number of 201 answers to POST /product).',
    registers: [registry],
  });

  const logLinesDropped = new Counter({
    name: 'product_service_log_lines_dropped_total',
    help: 'Log lines never written: stdout did not take them (a log shipper not reading) and the log buffer was full.',
    registers: [registry],
  });

  const requestDuration = new Histogram({
    name: 'http_server_request_duration_seconds',
    help: 'Duration of HTTP server requests, from the API server receiving the request (or the proxy in front, when QUEUE_TIME_HEADER and QUEUE_TIME_FROM say so) to the response being handed to Node.',
    labelNames: ['http_request_method', 'http_route', 'http_response_status_code'] as const,
    buckets: DURATION_BUCKETS,
    enableExemplars: true,
    registers: [registry],
  });
  for (const labels of INITIAL_REQUEST_SERIES) requestDuration.zero(labels);
  const queueDuration = new Histogram({
    name: 'product_service_http_request_queue_seconds',
    help: 'Time requests waited between the proxy in front receiving them (the header QUEUE_TIME_HEADER names, from a peer in QUEUE_TIME_FROM) and the API server reading them; only requests that carry one. http_server_request_duration_seconds includes it.',
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const queuedMs = requestQueuedMs(options.queueTime);

  const refused = new Counter({
    name: 'product_service_http_requests_refused_total',
    help: 'Requests the API server answered itself and closed the connection before the application saw them (bad_request 400, connect 405, request_timeout 408, expectation_failed 417, headers_too_large 431, http_version_not_supported 505), and connections closed unanswered for pipelining too many requests (pipelining_limit) or for arriving while MAX_CONNECTIONS were open (connection_limit).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  const received = new WeakMap<IncomingMessage, number>();

  new Gauge({
    name: 'product_service_build_info',
    help: 'Always 1; the labels say which build is running: version (package.json), revision (BUILD_REVISION), config (CONFIG_REVISION), nodejs_version.',
    labelNames: ['version', 'revision', 'config', 'nodejs_version'] as const,
    registers: [registry],
  }).set({ version: options.service.version, revision: options.service.revision, config: options.service.config, nodejs_version: process.version }, 1);

  registerFaultMetrics(registry, options.faults ?? { faultErrorRatio: 0, faultDelayMs: 0 });
  registerSpanPipelineMetrics(registry, options.spanPipeline ?? (() => Promise.resolve(undefined)));
  if (options.processMetrics) {
    // The finest precision: the delay histogram reports the sampling interval, so an idle process reads about it.
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1 });
    registerV8Metrics(registry);
    // Gauges named like counters, which promtool rejects. Upstream: https://github.com/prometheus/client_js/issues/283
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      registry.removeSingleMetric(name);
    }
  }

  return {
    registry,
    countProductIdIssued: (): void => productIdsIssued.inc(),
    countLogLineDropped: (): void => logLinesDropped.inc(),
    countRefusedRequest: (reason: RefusalReason): void => refused.inc({ reason }),
    /** Starts the request's recorded duration, earlier by its queue time when a trusted proxy says it. */
    requestReceived(req: IncomingMessage): void {
      const queued = queuedMs(req);
      if (queued !== undefined) queueDuration.observe(queued / 1000);
      received.set(req, performance.now() - (queued ?? 0));
    },
    receivedAt: (req: IncomingMessage): number | undefined => received.get(req),
    observeRequest(method: string, route: string, status: number, seconds: number, traceId: string | undefined): void {
      requestDuration.observe({
        labels: { http_request_method: KNOWN_METHODS.has(method) ? method : '_OTHER', http_route: route, http_response_status_code: status },
        value: seconds,
        // prom-client types exemplar labels as if they were the metric's own label names.
        exemplarLabels: (traceId === undefined ? NO_EXEMPLAR : { trace_id: traceId }) as LabelValues<string>,
      });
    },
    render: createRenderer(registry),
  };
}

/** Shown so that a rehearsal is not taken for an incident; one gauge per unit, not a label mixing a ratio and seconds. */
function registerFaultMetrics(registry: Registry<RegistryContentType>, faults: Faults): void {
  new Gauge({
    name: 'product_service_fault_error_ratio',
    help: 'Share of POST /product requests answered 500 on purpose (FAULT_ERROR_RATIO, a game day); 0 when no fault is injected.',
    registers: [registry],
  }).set(faults.faultErrorRatio);
  new Gauge({
    name: 'product_service_fault_delay_seconds',
    help: 'Delay added on purpose before POST /product answers (FAULT_DELAY, a game day); 0 when no fault is injected.',
    registers: [registry],
  }).set(faults.faultDelayMs / 1000);
}

/** Beyond it, the clocks disagree or the header is forged: no proxy holds a request longer (nginx's proxy timeouts: 60 s). */
const MAX_QUEUE_MS = 60_000;

/**
 * The queue time, in ms, from the header QUEUE_TIME_HEADER names, sent by a peer in QUEUE_TIME_FROM
 * (a client would set its own latency): `t=` and seconds (nginx), milliseconds (Heroku),
 * microseconds (Apache) or nanoseconds since the epoch, told apart by magnitude.
 */
function requestQueuedMs(queueTime: Config['queueTime']): (req: IncomingMessage) => number | undefined {
  if (queueTime === undefined) return () => undefined;
  const trusted = fromPeers(queueTime.from);
  return (req) => {
    const header = req.headers[queueTime.header];
    if (typeof header !== 'string' || !trusted(req)) return undefined;
    const match = /^(?:t=)?(\d{1,19}(?:\.\d{1,9})?)$/.exec(header.trim());
    if (match === null) return undefined;
    const value = Number(match[1]);
    const startedMs = value < 1e11 ? value * 1e3 : value < 1e14 ? value : value < 1e17 ? value / 1e3 : value / 1e6;
    const queued = Date.now() - startedMs;
    return queued >= 0 && queued <= MAX_QUEUE_MS ? queued : undefined;
  };
}

/**
 * The batch span processor's self-metrics, read at each scrape. The OTLP exporter reports none of
 * its own, so its counter is derived: a span finished with an error other than queue_full failed export.
 */
function registerSpanPipelineMetrics(registry: Registry<RegistryContentType>, read: Telemetry['readSpanPipeline']): void {
  let latest: Promise<Awaited<ReturnType<typeof read>>> | undefined;
  const counts = (): Promise<Awaited<ReturnType<typeof read>>> => {
    latest ??= read().finally(() => setImmediate(() => (latest = undefined)));
    return latest;
  };
  // Spans dropped as queue_full never reached the exporter.
  for (const [name, help, queueFull] of [
    [
      'otel_sdk_processor_span_processed_total',
      'Spans the batch span processor finished with; error_type="queue_full" counts spans dropped because the export queue was full, other error types spans whose export failed.',
      true,
    ],
    ['otel_sdk_exporter_span_exported_total', 'Spans the OTLP exporter tried to send; error_type is set on spans whose export failed.', false],
  ] as const) {
    new Counter({
      name,
      help,
      labelNames: ['error_type'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        this.inc(0);
        if (queueFull) this.inc({ error_type: 'queue_full' }, 0);
        for (const [errorType, value] of (await counts())?.processed ?? []) {
          if (errorType === '') this.inc(value);
          else if (queueFull || errorType !== 'queue_full') this.inc({ error_type: errorType }, value);
        }
      },
    });
  }
  new Gauge({
    name: 'otel_sdk_processor_span_queue_size',
    help: 'Finished spans waiting in the export queue.',
    registers: [registry],
    async collect() {
      this.set((await counts())?.queueSize ?? 0);
    },
  });
  new Gauge({
    name: 'otel_sdk_processor_span_queue_capacity',
    help: 'The most finished spans the export queue holds before it drops new ones.',
    registers: [registry],
    async collect() {
      this.set((await counts())?.queueCapacity ?? 0);
    },
  });
}

/**
 * What the alerts need beyond prom-client's defaults: the heap limit (a leak ends in V8's abort
 * there, below the container's), and event-loop time as a counter, so any window's utilisation is a rate ratio.
 */
function registerV8Metrics(registry: Registry<RegistryContentType>): void {
  new Gauge({
    name: 'nodejs_heap_size_limit_bytes',
    help: "V8's heap size limit (heap_size_limit); past it V8 aborts the process with 'heap out of memory'.",
    registers: [registry],
    collect() {
      this.set(getHeapStatistics().heap_size_limit);
    },
  });
  new Counter({
    name: 'nodejs_eventloop_time_seconds_total',
    help: 'Time the event loop spent running callbacks (active) and waiting for events (idle), since the process started.',
    labelNames: ['nodejs_eventloop_state'] as const,
    registers: [registry],
    collect() {
      const { active, idle } = performance.eventLoopUtilization();
      this.reset();
      this.inc({ nodejs_eventloop_state: 'active' }, active / 1000);
      this.inc({ nodejs_eventloop_state: 'idle' }, idle / 1000);
    },
  });
}

/**
 * One render per format serves every scrape that asks while it is pending, so flooding the metrics
 * port does not multiply the work; it starts at the end of the turn so that every scrape read in
 * that turn joins it. Renders run one at a time and counter names are put back afterwards, since
 * prom-client strips "_total" in place for OpenMetrics. Upstream: https://github.com/prometheus/client_js/pull/829
 */
function createRenderer(registry: Registry<RegistryContentType>): (accept: string | undefined) => Promise<{ contentType: string; body: string }> {
  const endOfTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  let queue: Promise<unknown> = Promise.resolve();
  const pending = new Map<boolean, Promise<{ contentType: string; body: string }>>();
  return (accept) => {
    const openMetrics = accept !== undefined && accept.includes('application/openmetrics-text');
    const shared = pending.get(openMetrics);
    if (shared !== undefined) return shared;
    const run = async (): Promise<{ contentType: string; body: string }> => {
      const counters = registry.getMetricsAsArray().filter((metric) => String(metric.type) === 'counter');
      const names = counters.map((metric) => metric.name);
      registry.setContentType(openMetrics ? Registry.OPENMETRICS_CONTENT_TYPE : Registry.PROMETHEUS_CONTENT_TYPE);
      try {
        return { contentType: registry.contentType, body: await registry.metrics() };
      } finally {
        counters.forEach((metric, index) => {
          (metric as { name: string }).name = names[index] as string;
        });
      }
    };
    const result = queue.then(endOfTurn).then(run);
    pending.set(openMetrics, result);
    queue = result.then(
      () => pending.delete(openMetrics),
      () => pending.delete(openMetrics),
    );
    return result;
  };
}
