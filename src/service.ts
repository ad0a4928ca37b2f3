/**
 * The service assembled: createService builds it from its configuration and dependencies (the
 * entry point and the tests both call it); runService, called by main.ts once telemetry has
 * started, reads the configuration, creates the logger and the metrics, listens on the API and
 * metrics ports, and shuts down gracefully on SIGTERM/SIGINT.
 */
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { ConfigError, parseConfig, type Config } from './config';
import { createApp } from './http/app';
import { faultsSet } from './http/faults';
import { createMetricsServer } from './http/metrics-server';
import { failureOf } from './http/middleware';
import { createRouter, isProbeRequest, isRoutedRequest, type RouteDependencies } from './http/routes';
import { createHttpServer, type ServerOptions } from './http/server';
import { createLogger, exitAfterFlush, type Logger } from './observability/logger';
import { createMetrics, type Metrics } from './observability/metrics';
import { createSpanAttributes, fromTrustedProxy } from './observability/span-attributes';
import type { IncomingRequests, Telemetry } from './observability/telemetry';
import { packageInfo, type ServiceInfo } from './service-info';
import { installGracefulShutdown } from './shutdown';

export interface ServiceDependencies {
  config: Pick<
    Config,
    'port' | 'metricsPort' | 'host' | 'bodyLimit' | 'maxConnections' | 'traceQueryParams' | 'trustedProxies' | 'faultErrorRatio' | 'faultDelayMs'
  >;
  logger: Logger;
  metrics: Metrics;
  /** Draws product ids; randomProductId (routes.ts) by default. Tests replace it to provoke failures. */
  issueProductId?: RouteDependencies['issueProductId'];
  /** Both servers' limits; production's unless given (tests shorten them). */
  serverOptions?: ServerOptions;
}

export interface Service {
  /** The API port: the Koa application behind the hardened HTTP server. */
  readonly apiServer: Server;
  /** The metrics port: `/metrics` for Prometheus. */
  readonly metricsServer: Server;
  /** Listens on both ports; rejects (e.g. EADDRINUSE) if either cannot. */
  listen(): Promise<void>;
  /**
   * How telemetry traces requests: no span for probes of the API port nor for any request to the
   * metrics port; on the others, what span-attributes.ts allows.
   */
  readonly incomingRequests: IncomingRequests;
}

export function createService(deps: ServiceDependencies): Service {
  const { config, logger, metrics } = deps;
  const router = createRouter({
    bodyLimit: config.bodyLimit,
    onProductIdIssued: () => metrics.countProductIdIssued(),
    issueProductId: deps.issueProductId,
    faults: config,
  });
  const handleRequest = createApp({ router, logger, metrics }).callback();
  // Koa's handler returns a promise that never rejects (errors go to app.on('error')).
  const apiServer = createHttpServer(
    (req, res) => void handleRequest(req, res),
    { logger, metrics, maxConnections: config.maxConnections, onRequest: (req) => metrics.requestReceived(req) },
    deps.serverOptions,
  );
  const metricsServer = createMetricsServer(metrics, logger, deps.serverOptions);
  const scrapeConnections = new WeakSet<Duplex>();
  metricsServer.on('connection', (socket: Duplex) => scrapeConnections.add(socket));
  return {
    apiServer,
    metricsServer,
    async listen() {
      await listen(apiServer, config.port, config.host);
      await listen(metricsServer, config.metricsPort, config.host);
    },
    incomingRequests: {
      untraced: (request) => scrapeConnections.has(request.socket) || isProbeRequest(router, request),
      spanAttributes: createSpanAttributes({
        routed: (request) => isRoutedRequest(router, request),
        queryParams: config.traceQueryParams,
        trustedProxies: config.trustedProxies,
      }),
      traceContextTrusted: fromTrustedProxy(config.trustedProxies),
      failure: failureOf,
    },
  };
}

/** @public main.ts requires it once telemetry has started, which knip does not follow. */
export async function runService(telemetry: Telemetry): Promise<void> {
  const config = readConfigOrExit();
  const info: ServiceInfo = { ...packageInfo(), revision: config.buildRevision, config: config.configRevision };
  // Metrics first: the logger counts in them the lines a blocked stdout drops.
  const metrics = createMetrics({
    service: info,
    processMetrics: true,
    spanPipeline: () => telemetry.readSpanPipeline(),
    faults: config,
    trustedProxies: config.trustedProxies,
  });
  const logger = createLogger({ level: config.logLevel, service: info, onDroppedLines: (lines) => metrics.countLogLinesDropped(lines) });
  exitOnUnexpectedFailure(logger);

  const service = createService({ config, logger, metrics });
  telemetry.describeIncomingRequests(service.incomingRequests);
  try {
    await service.listen();
  } catch (error) {
    logger.fatal({ err: error }, 'cannot listen');
    exitAfterFlush(logger, 1);
    return;
  }
  const { apiServer, metricsServer } = service;
  installGracefulShutdown({
    apiServer,
    metricsServer,
    delayMs: config.shutdownDelayMs,
    timeoutMs: config.shutdownTimeoutMs,
    logger,
    flushTelemetry: () => telemetry.shutdown(),
    exit: (code, flushWaitMs) => exitAfterFlush(logger, code, flushWaitMs),
  });
  logger.info(
    { port: portOf(apiServer), metrics_port: portOf(metricsServer), host: config.host, revision: info.revision, node: process.version },
    'product-service listening',
  );
  if (faultsSet(config)) {
    // A rehearsal must not be mistaken for an incident: said at start, and on /metrics (createMetrics).
    logger.warn(
      { fault_error_ratio: config.faultErrorRatio, fault_delay_ms: config.faultDelayMs },
      'faults injected into POST /product on purpose (FAULT_ERROR_RATIO, FAULT_DELAY): unset them to end the rehearsal',
    );
  }
}

function readConfigOrExit(): Config {
  try {
    return parseConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // One line, before anything listens: the variable, the value and what is allowed.
    process.stderr.write(`product-service: ${error.message}\n`);
    process.exit(1);
  }
}

/** Resolves once the server listens; rejects (e.g. EADDRINUSE) instead of emitting an unhandled error. */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The port a listening server got (the configured one, or the one the OS chose for port 0). */
export function portOf(server: Server): number | undefined {
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : undefined;
}

/** A failure nothing handled leaves the process in an unknown state: log it as one JSON line and exit 1. */
function exitOnUnexpectedFailure(logger: Logger): void {
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error }, 'uncaught exception');
    exitAfterFlush(logger, 1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.fatal({ err: reason }, 'unhandled promise rejection');
    exitAfterFlush(logger, 1);
  });
}
