/**
 * The service, run by main.ts once telemetry has started: reads the configuration, builds the
 * application from its parts, listens on the API and metrics ports, and shuts down gracefully on
 * SIGTERM/SIGINT.
 */
import { createApp } from './app';
import { ConfigError, parseConfig, type Config } from './config';
import { createHttpServer, listen } from './http-server';
import { createLogger, exitAfterFlush, type Logger } from './logger';
import { createMetrics } from './metrics';
import { createMetricsServer } from './metrics-server';
import { serviceInfo } from './service-info';
import { installGracefulShutdown } from './shutdown';
import type { Telemetry } from './telemetry';

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

export async function runService(telemetry: Telemetry): Promise<void> {
  const config = readConfigOrExit();
  const service = serviceInfo();
  // Metrics first: the logger counts in them the lines a blocked stdout drops.
  const metrics = createMetrics({ service, processMetrics: true, spanPipeline: () => telemetry.readSpanPipeline() });
  const logger = createLogger({ level: config.logLevel, service, onDroppedLines: (lines) => metrics.countLogLinesDropped(lines) });
  exitOnUnexpectedFailure(logger);

  const app = createApp({ bodyLimit: config.bodyLimit, logger, metrics });
  const handleRequest = app.callback();
  // Koa's handler returns a promise that never rejects (errors go to app.on('error')).
  const apiServer = createHttpServer((req, res) => void handleRequest(req, res), logger);
  const adminServer = createMetricsServer(metrics, logger);

  try {
    await listen(apiServer, config.port, config.host);
    await listen(adminServer, config.metricsPort, config.host);
  } catch (error) {
    logger.fatal({ err: error }, 'cannot listen');
    exitAfterFlush(logger, 1);
    return;
  }
  installGracefulShutdown({
    apiServer,
    adminServer,
    delayMs: config.shutdownDelayMs,
    timeoutMs: config.shutdownTimeoutMs,
    logger,
    flushTelemetry: () => telemetry.shutdown(),
    exit: (code, flushWaitMs) => exitAfterFlush(logger, code, flushWaitMs),
  });
  logger.info(
    { port: portOf(apiServer), metrics_port: portOf(adminServer), host: config.host, revision: service.revision, node: process.version },
    'product-service listening',
  );
}

function portOf(server: import('node:http').Server): number | undefined {
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

