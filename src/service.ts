/** The service assembled: createService (the tests call it too), and runService for main.ts. */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { parseConfig, type Config } from './config';
import { createApp } from './http/app';
import { warnOfFaults } from './http/faults';
import { createMetricsServer } from './http/metrics-server';
import { createProbeServer } from './http/probe-server';
import { failureOf } from './http/middleware';
import { createRouter, PROBE_ROUTES, routeOfRequest, type RouteDependencies } from './http/routes';
import { createHttpServer, type ServerOptions } from './http/server';
import { createLogger, exitAfterFlush, type Logger } from './observability/logger';
import { createMetrics, type Metrics } from './observability/metrics';
import { createSpanAttributes, fromPeers } from './observability/span-attributes';
import type { IncomingRequests, Telemetry } from './observability/telemetry';
import { packageInfo, type ServiceInfo } from './service-info';
import { installGracefulShutdown } from './shutdown';

export interface ServiceDependencies {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  issueProductId?: RouteDependencies['issueProductId'];
  serverOptions?: ServerOptions;
}

export function createService(deps: ServiceDependencies) {
  const { config, logger, metrics } = deps;
  const router = createRouter({ config, metrics, issueProductId: deps.issueProductId });
  const handleRequest = createApp({ router, logger, metrics }).callback();
  const apiServer = createHttpServer(
    (req, res) => void handleRequest(req, res),
    { logger, metrics, maxConnections: config.maxConnections },
    deps.serverOptions,
  );
  const metricsServer = createMetricsServer(metrics, logger, deps.serverOptions);
  const probeServer = config.probePort === undefined ? undefined : createProbeServer(logger, deps.serverOptions);
  // Scrapes and probes get no span.
  const sideConnections = new WeakSet<Duplex>();
  for (const server of [metricsServer, probeServer]) server?.on('connection', (socket: Duplex) => sideConnections.add(socket));
  return {
    apiServer,
    metricsServer,
    probeServer,
    async listen(): Promise<void> {
      await listen(apiServer, config.port, config.host);
      await listen(metricsServer, config.metricsPort, config.host);
      if (probeServer !== undefined) await listen(probeServer, config.probePort ?? 0, config.host);
    },
    incomingRequests: {
      // Stryker disable next-line StringLiteral: any text no route has does the same
      untraced: (request) => sideConnections.has(request.socket) || PROBE_ROUTES.has(routeOfRequest(router, request) ?? ''),
      spanAttributes: createSpanAttributes({
        routed: (request) => routeOfRequest(router, request) !== undefined,
        queryParams: config.traceQueryParams,
        trustedProxies: config.trustedProxies,
      }),
      traceContextTrusted: fromPeers(config.traceContextFrom),
      failure: failureOf,
    } satisfies IncomingRequests,
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
    queueTime: config.queueTime,
  });
  const logger = createLogger({ level: config.logLevel, service: info, onDroppedLine: metrics.countLogLineDropped });
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
  const { apiServer, metricsServer, probeServer } = service;
  installGracefulShutdown({
    apiServer,
    delayMs: config.shutdownDelayMs,
    timeoutMs: config.shutdownTimeoutMs,
    logger,
    flushTelemetry: () => telemetry.shutdown(),
    exit: (code, flushWaitMs) => exitAfterFlush(logger, code, flushWaitMs),
  });
  logger.info(
    {
      port: portOf(apiServer),
      metrics_port: portOf(metricsServer),
      probe_port: probeServer && portOf(probeServer),
      host: config.host,
      revision: info.revision,
      node: process.version,
    },
    'product-service listening',
  );
  warnOfFaults(logger, config);
  for (const warning of config.trustWarnings) logger.warn(warning);
}

function readConfigOrExit(): Config {
  try {
    return parseConfig(process.env);
  } catch (error) {
    process.stderr.write(`product-service: ${(error as Error).message}\n`);
    process.exit(1);
  }
}

/** events.once rejects on the server's 'error' (EADDRINUSE) instead. */
async function listen(server: Server, port: number, host: string): Promise<void> {
  await once(server.listen(port, host), 'listening');
}

/** A listening TCP server's port. */
export function portOf(server: Server): number {
  return (server.address() as AddressInfo).port;
}

/** A failure nothing handled leaves the process in an unknown state. */
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
