import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type LabelValues, type RegistryContentType } from 'prom-client';
import { NO_FAULTS, type AddressRange, type Faults } from '../config';
import type { ServiceInfo } from '../service-info';
import type { Telemetry } from './telemetry';

/** The route label of requests that matched no route: a fixed value, never the raw path. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Buckets of http_server_request_duration_seconds, in seconds: OpenTelemetry's semantic-convention
 * boundaries (0.005 to 10), below them sub-millisecond ones, because the service answers in a
 * fraction of a millisecond and a quantile inside one bucket is interpolated, not measured.
 */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/**
 * Request series the alert rules divide by, created at 0 when the service starts. rate() needs a
 * sample before a series' first increase: a series born with a new pod's first errors would leave
 * those errors out of every ratio.
 */
const INITIAL_REQUEST_SERIES = [201, 500, 499].map((status) => ({ http_request_method: 'POST', http_route: '/product', http_response_status_code: status }));

/** Why the API server turned a request (or a connection) away before the application saw it (server.ts, connections.ts). */
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
const REFUSAL_BY_STATUS: Readonly<Record<number, RefusalReason>> = {
  400: 'bad_request',
  405: 'connect',
  408: 'request_timeout',
  417: 'expectation_failed',
  431: 'headers_too_large',
  505: 'http_version_not_supported',
};

/** The refusal reason of a status the API server answers before the application (400 for any other). */
export const refusalReason = (status: number): RefusalReason => REFUSAL_BY_STATUS[status] ?? 'bad_request';

const NO_EXEMPLAR = Object.freeze({});

export interface Metrics {
  readonly registry: Registry<RegistryContentType>;
  /** Counts ids issued; equals the number of 201 answers. */
  countProductIdIssued(): void;
  /** Counts log lines stdout dropped because its buffer was full (logger.ts). */
  countLogLinesDropped(lines: number): void;
  /** Counts a request (or a connection) the API server refused before the application saw it. */
  countRefusedRequest(reason: RefusalReason): void;
  /**
   * Notes the moment the API server received a request: its recorded duration starts there, or
   * earlier by the time it queued, when a trusted proxy said when it received it (requestQueuedMs).
   */
  requestReceived(req: IncomingMessage): void;
  /** Where the recorded duration of the request starts (performance.now()), if requestReceived saw it. */
  receivedAt(req: IncomingMessage): number | undefined;
  /** Records one finished request. `traceId` is given for sampled requests and becomes an exemplar. */
  observeRequest(method: string, route: string, status: number, seconds: number, traceId: string | undefined): void;
  /** The exposition in the format the scraper asked for through its Accept header. */
  render(accept: string | undefined): Promise<{ contentType: string; body: string }>;
}

export interface MetricsOptions {
  service: ServiceInfo;
  /** Node process metrics (CPU, memory, event loop, GC). Off in tests that build many apps. */
  processMetrics: boolean;
  /** The trace pipeline's own counts (Telemetry.readSpanPipeline); without it the otel_sdk_* series stay at zero. */
  spanPipeline?: Telemetry['readSpanPipeline'];
  /** The faults injected into POST /product (config.ts), shown so that a rehearsal is not taken for an incident; none by default. */
  faults?: Faults;
  /** Proxies whose X-Request-Start is believed (TRUSTED_PROXIES); none by default. */
  trustedProxies?: readonly AddressRange[];
}

export function createMetrics(options: MetricsOptions): Metrics {
  // Its content type is chosen per scrape (see render): OpenMetrics, the only format that carries
  // exemplars, when the scraper asks for it, plain Prometheus text otherwise.
  const registry = new Registry<RegistryContentType>();
  // prom-client only lets exemplar-carrying metrics join a registry that is in OpenMetrics mode.
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
    help: 'Duration of HTTP server requests, from the API server receiving the request (or the trusted proxy in front, when it sends X-Request-Start) to the response being handed to Node.',
    labelNames: ['http_request_method', 'http_route', 'http_response_status_code'] as const,
    buckets: DURATION_BUCKETS,
    enableExemplars: true,
    registers: [registry],
  });
  for (const labels of INITIAL_REQUEST_SERIES) requestDuration.zero(labels);
  const queueDuration = new Histogram({
    name: 'product_service_http_request_queue_seconds',
    help: 'Time requests waited between a trusted proxy receiving them (its X-Request-Start header) and the API server reading them; only requests that carry one. http_server_request_duration_seconds includes it.',
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const queuedMs = requestQueuedMs(options.trustedProxies ?? []);

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
    help: 'Always 1; the labels say which build is running.',
    labelNames: ['version', 'revision', 'config', 'nodejs_version'] as const,
    registers: [registry],
  }).set({ version: options.service.version, revision: options.service.revision, config: options.service.config, nodejs_version: process.version }, 1);

  registerFaultMetrics(registry, options.faults ?? NO_FAULTS);
  registerSpanPipelineMetrics(registry, options.spanPipeline ?? (() => Promise.resolve(undefined)));
  if (options.processMetrics) {
    // 1 ms, the finest Node's event-loop delay histogram allows: it reports the whole sampling
    // interval, so an idle process reads about the precision (prom-client's default is 10 ms).
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1 });
    registerV8Metrics(registry);
    // Three gauges prom-client names with a counter's "_total" suffix, which `promtool check metrics`
    // rejects; the same counts, by type, stay in nodejs_active_{handles,requests,resources}.
    // Upstream: https://github.com/prometheus/client_js/issues/283
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      registry.removeSingleMetric(name);
    }
  }

  return {
    registry,
    countProductIdIssued: () => productIdsIssued.inc(),
    countLogLinesDropped: (lines) => logLinesDropped.inc(lines),
    countRefusedRequest: (reason) => refused.inc({ reason }),
    requestReceived(req) {
      const queued = queuedMs(req);
      if (queued !== undefined) queueDuration.observe(queued / 1000);
      received.set(req, performance.now() - (queued ?? 0));
    },
    receivedAt: (req) => received.get(req),
    observeRequest(method, route, status, seconds, traceId) {
      requestDuration.observe({
        labels: { http_request_method: method, http_route: route, http_response_status_code: status },
        value: seconds,
        // prom-client types exemplar labels as if they were the metric's own label names.
        exemplarLabels: (traceId === undefined ? NO_EXEMPLAR : { trace_id: traceId }) as LabelValues<string>,
      });
    },
    render: createRenderer(registry),
  };
}

/** The most a proxy's X-Request-Start may lie in the past: beyond it, the clocks disagree, not the queue. */
const MAX_QUEUE_MS = 3_600_000;

/**
 * How long a request waited before the API server read it, in ms, from the X-Request-Start
 * header of a trusted proxy (the peer is in `trusted`): `t=` and the time it received the
 * request since the epoch, in seconds with a fraction (nginx's `${msec}`), milliseconds (Heroku's
 * router, without `t=`), microseconds (Apache's `%t`) or nanoseconds, told apart by magnitude.
 * Undefined for anyone else's header (a client would set its own latency), for no header, and
 * for a time in the future or over an hour ago.
 */
function requestQueuedMs(trustedProxies: readonly AddressRange[]): (req: IncomingMessage) => number | undefined {
  if (trustedProxies.length === 0) return () => undefined;
  const trusted = new BlockList();
  for (const { address, prefix, family } of trustedProxies) trusted.addSubnet(address, prefix, family);
  return (req) => {
    const header = req.headers['x-request-start'];
    const peer = req.socket.remoteAddress;
    if (typeof header !== 'string' || peer === undefined || !trusted.check(peer, isIP(peer) === 6 ? 'ipv6' : 'ipv4')) return undefined;
    const match = /^(?:t=)?(\d{1,19}(?:\.\d{1,9})?)$/.exec(header.trim());
    if (match === null) return undefined;
    const value = Number(match[1]);
    const startedMs = value < 1e11 ? value * 1e3 : value < 1e14 ? value : value < 1e17 ? value / 1e3 : value / 1e6;
    const queued = Date.now() - startedMs;
    return queued >= 0 && queued <= MAX_QUEUE_MS ? queued : undefined;
  };
}

/**
 * The faults set (FAULT_ERROR_RATIO, FAULT_DELAY), 0 when none: the dashboard shows them beside the
 * errors and latency they cause. Two gauges, one per unit, rather than one with a `fault` label
 * whose values would mix a ratio and seconds.
 */
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

/**
 * The batch span processor's self-metrics (OpenTelemetry's otel.sdk.processor.span.*), read from the
 * SDK at each scrape. The OTLP exporter NodeSDK builds from the environment reports none of its
 * own, so its counter is derived from the same counts: a span the processor finished with an error
 * other than queue_full is one whose export failed.
 */
function registerSpanPipelineMetrics(registry: Registry<RegistryContentType>, read: Telemetry['readSpanPipeline']): void {
  // Scrapes read the SDK once and the four metrics share what it said.
  let latest: Promise<Awaited<ReturnType<typeof read>>> | undefined;
  const counts = (): Promise<Awaited<ReturnType<typeof read>>> => {
    latest ??= read().finally(() => setImmediate(() => (latest = undefined)));
    return latest;
  };
  new Counter({
    name: 'otel_sdk_processor_span_processed_total',
    help: 'Spans the batch span processor finished with; error_type="queue_full" counts spans dropped because the export queue was full, other error types spans whose export failed.',
    labelNames: ['error_type'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      this.inc(0);
      this.inc({ error_type: 'queue_full' }, 0);
      for (const [errorType, value] of (await counts())?.processed ?? []) {
        if (errorType === '') this.inc(value);
        else this.inc({ error_type: errorType }, value);
      }
    },
  });
  new Counter({
    name: 'otel_sdk_exporter_span_exported_total',
    help: 'Spans the OTLP exporter tried to send; error_type is set on spans whose export failed.',
    labelNames: ['error_type'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      this.inc(0);
      for (const [errorType, value] of (await counts())?.processed ?? []) {
        if (errorType === '') this.inc(value);
        else if (errorType !== 'queue_full') this.inc({ error_type: errorType }, value);
      }
    },
  });
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
 * What prom-client's default metrics lack for the alert rules and the dashboard: V8's heap limit
 * (the heap alert divides the heap by it: a leak ends in V8's abort at that limit, below the
 * container's), and event-loop utilisation as OpenTelemetry's nodejs.eventloop.time counter (time
 * the loop spent running callbacks and idle), from which any window's utilisation is a rate ratio.
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
 * One render serves every scrape that asks while it is pending: N concurrent scrapes (or N
 * pipelined on one connection) cost one render per format, not N, so flooding the metrics port
 * does not multiply the work. A render starts once the current turn of the event loop has handled
 * all its I/O (setImmediate), so that the scrapes read in that turn, from every connection, find
 * it pending; most of a render runs without yielding, so started at once it would be done before
 * the next connection's read. A scrape that joins a render already running gets values at most
 * one render older than its request; Prometheus stamps them with the scrape's start anyway.
 *
 * prom-client renames counters in place while it writes OpenMetrics (it strips "_total" from
 * metric.name, see Registry.metrics), which would break a plain-text render running at the same
 * time. So renders run one at a time, in the format asked for, and the names are put back
 * afterwards. Upstream: https://github.com/prometheus/client_js/pull/829
 */
function createRenderer(registry: Registry<RegistryContentType>): Metrics['render'] {
  const endOfTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  let queue: Promise<unknown> = Promise.resolve();
  const pending = new Map<boolean, ReturnType<Metrics['render']>>();
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
