import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, onTestFinished } from 'vitest';
import { parseConfig, type Faults } from '../../src/config';
import type { ServerOptions } from '../../src/http/server';
import { createLogger } from '../../src/observability/logger';
import { createMetrics } from '../../src/observability/metrics';
import { createService, portOf, type ServiceDependencies } from '../../src/service';

/** Timeouts short enough that a test sees headersTimeout (408) and requestTimeout cut connections within a second. */
export const SHORT_TIMEOUTS: ServerOptions = {
  timeouts: { keepAliveTimeout: 5000, headersTimeout: 300, requestTimeout: 600, connectionsCheckingInterval: 50 },
};

export type InProcessService = Awaited<ReturnType<typeof startInProcess>>;

export interface InProcessOverrides {
  bodyLimit?: number;
  issueProductId?: ServiceDependencies['issueProductId'];
  /** Faults injected into POST /product, as FAULT_ERROR_RATIO and FAULT_DELAY set them. */
  faults?: Faults;
  /** More variables, as they are written (QUEUE_TIME_HEADER, QUEUE_TIME_FROM, ...). */
  env?: Record<string, string>;
  /** What the metrics read of the span pipeline (telemetry's readSpanPipeline), to make a scrape fail. */
  spanPipeline?: Parameters<typeof createMetrics>[0]['spanPipeline'];
}

/**
 * createService as the entry point calls it, on 127.0.0.1 and ports the OS picks, with a logger at
 * debug and no process metrics (tests build many services in one process).
 */
export async function startInProcess(overrides: InProcessOverrides = {}, serverOptions: ServerOptions = {}) {
  const { logger, logs } = debugLogger();
  const config = parseConfig({ HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', ...overrides.env });
  const faults = overrides.faults ?? config;
  const metrics = createMetrics({
    service: { name: 'product-service', version: 'test', revision: 'test', config: 'test' },
    processMetrics: false,
    faults,
    queueTime: config.queueTime,
    spanPipeline: overrides.spanPipeline,
  });
  const service = createService({
    config: { ...config, ...overrides.faults, bodyLimit: overrides.bodyLimit ?? config.bodyLimit },
    logger,
    metrics,
    issueProductId: overrides.issueProductId,
    serverOptions,
  });
  await service.listen();
  const port = portOf(service.apiServer);
  const metricsPort = portOf(service.metricsServer);
  return {
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    apiServer: service.apiServer,
    /** The metrics port's server, its port, and its endpoint http://127.0.0.1:PORT/metrics (as ServiceProcess.metricsUrl). */
    metricsServer: service.metricsServer,
    metricsPort,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    metrics,
    /** What the metrics port would answer a plain scrape now. */
    exposition: async (): Promise<string> => (await metrics.render(undefined)).body,
    logs,
    close: () => Promise.all([service.apiServer, service.metricsServer].map(closeNow)).then(() => undefined),
  };
}

/** The service's logger at debug, its lines parsed as they are written. */
export function debugLogger(): { logger: ReturnType<typeof createLogger>; logs: Array<Record<string, unknown>> } {
  const logs: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: createLogger({ level: 'debug', service: { name: 'product-service', version: 'test' }, destination, onDroppedLine: () => {} }), logs };
}

function closeNow(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** startInProcess for the test that calls it: closed once the test has finished. */
export async function inProcessForTest(overrides: InProcessOverrides = {}, serverOptions: ServerOptions = {}): Promise<InProcessService> {
  const svc = await startInProcess(overrides, serverOptions);
  onTestFinished(() => svc.close());
  return svc;
}

/** startInProcess for the tests of the describe block (or file) that calls it: filled in before them, closed after them. */
export function inProcessForSuite(overrides: InProcessOverrides = {}, serverOptions: ServerOptions = {}): InProcessService {
  const svc = {} as InProcessService;
  beforeAll(async () => {
    Object.assign(svc, await startInProcess(overrides, serverOptions));
  });
  afterAll(async () => {
    if ('close' in svc) await svc.close(); // not when beforeAll could not start it
  });
  return svc;
}
