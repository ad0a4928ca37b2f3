import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './observability/logger';

export interface ShutdownOptions {
  /** The API server: drained gracefully. */
  apiServer: Server;
  /** The metrics server: kept answering until the API is drained, so the last scrape still works. */
  metricsServer: Server;
  /** Keep serving this long after the signal, so that endpoint removal reaches every balancer. */
  delayMs: number;
  /** The most time in-flight requests, then the telemetry flush, may take once the listener is closed. */
  timeoutMs: number;
  logger: Logger;
  /** Sends spans still queued; bounded by what remains of timeoutMs. */
  flushTelemetry: () => Promise<void>;
  /**
   * Exits once the buffered log lines are written, or after `flushWaitMs` (undefined: the exit's
   * own default) if stdout does not take them.
   */
  exit: (code: number, flushWaitMs?: number) => void;
}

/** A second signal means now: a working stdout takes the last lines in a few milliseconds, a stuck one gets no longer than this. */
const SECOND_SIGNAL_FLUSH_WAIT_MS = 250;

/** SIGINTs this close together are one Ctrl-C. */
const SAME_CTRL_C_MS = 500;

/**
 * SIGTERM and SIGINT start a graceful shutdown; a second signal exits at once with code 1.
 * Node runs as PID 1 in the container, so these handlers are the only thing between the signal
 * and a dropped request.
 */
export function installGracefulShutdown(options: ShutdownOptions): void {
  let shuttingDown = false;
  let sigintAt = Number.NEGATIVE_INFINITY;
  const onSignal = (signal: NodeJS.Signals): void => {
    // A terminal's Ctrl-C reaches a service that npm runs twice: from the terminal, and forwarded by npm.
    if (signal === 'SIGINT' && performance.now() - sigintAt < SAME_CTRL_C_MS) return;
    if (signal === 'SIGINT') sigintAt = performance.now();
    if (shuttingDown) {
      options.logger.warn({ signal }, 'second signal during shutdown: exiting now');
      options.exit(1, SECOND_SIGNAL_FLUSH_WAIT_MS);
      return;
    }
    shuttingDown = true;
    gracefulShutdown(signal, options).then(
      () => options.exit(0),
      (error: unknown) => {
        options.logger.error({ err: error }, 'shutdown failed');
        options.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** Every answer from now on asks the client to close its connection, so none is left idle behind a closed listener. */
function closeConnectionAfterResponse(_req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
}

async function gracefulShutdown(signal: NodeJS.Signals, options: ShutdownOptions): Promise<void> {
  const { apiServer, metricsServer, logger } = options;
  logger.info(
    { signal, delay_s: options.delayMs / 1000, timeout_s: options.timeoutMs / 1000 },
    'shutdown started: serving with Connection: close until the delay ends',
  );
  apiServer.prependListener('request', closeConnectionAfterResponse);
  await sleep(options.delayMs);

  logger.info('shutdown: listener closed, waiting for in-flight requests');
  const deadline = Date.now() + options.timeoutMs;
  const drained = await closeAndDrain(apiServer, options.timeoutMs);
  if (!drained) {
    logger.warn({ timeout_s: options.timeoutMs / 1000 }, 'shutdown: timeout reached, closing the remaining connections');
    apiServer.closeAllConnections();
  }

  // Whatever is left of the timeout (at least one second) is for the spans of the last requests.
  const flushBudgetMs = Math.max(1000, deadline - Date.now());
  const flushed = await Promise.race([
    options.flushTelemetry().then(
      () => true,
      // A collector that is down or failing loses these spans; it must not fail the shutdown.
      (error: unknown) => {
        logger.warn({ err: error }, 'shutdown: the last spans could not be exported');
        return true;
      },
    ),
    sleep(flushBudgetMs, false, { ref: false }),
  ]);
  if (!flushed) logger.warn({ budget_ms: flushBudgetMs }, 'shutdown: telemetry flush did not finish in time');

  metricsServer.close();
  metricsServer.closeAllConnections();
  logger.info('shutdown complete');
}

/**
 * Stops accepting connections and resolves true once every connection has ended, or false after
 * `timeoutMs`. Idle keep-alive connections are closed as they appear: one whose last response went
 * out before the signal (and so without Connection: close) would otherwise stay open until its
 * keep-alive timeout.
 */
function closeAndDrain(server: Server, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sweeper = setInterval(() => server.closeIdleConnections(), 100);
    const timer = setTimeout(() => finish(false), timeoutMs);
    const finish = (drained: boolean): void => {
      clearInterval(sweeper);
      clearTimeout(timer);
      resolve(drained);
    };
    server.close(() => finish(true));
    server.closeIdleConnections();
  });
}
