import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './observability/logger';

export interface ShutdownOptions {
  /** Only the API's server closes: the metrics and probe ports answer until the exit, so the last scrape works and liveness holds. */
  apiServer: Server;
  /** Serving on after the signal lets endpoint removal reach every balancer. */
  delayMs: number;
  timeoutMs: number;
  logger: Logger;
  flushTelemetry: () => Promise<void>;
  exit: (code: number, flushWaitMs?: number) => void;
}

/** A second signal means now: a working stdout takes the last lines in a few milliseconds, a stuck one gets no longer than this. */
const SECOND_SIGNAL_FLUSH_WAIT_MS = 250;

/** SIGINTs this close together are one Ctrl-C. */
const SAME_CTRL_C_MS = 500;

/** A second signal exits at once. Node runs as PID 1 in the container: these handlers stand between the signal and a dropped request. */
export function installGracefulShutdown(options: ShutdownOptions): void {
  let shuttingDown = false;
  let sigintAt = Number.NEGATIVE_INFINITY;
  const onSignal = (signal: NodeJS.Signals): void => {
    // A terminal's Ctrl-C reaches a service that npm runs twice: from the terminal, and forwarded by npm.
    // Stryker disable next-line EqualityOperator: time is continuous here; exactly 500 ms apart is either
    if (signal === 'SIGINT' && performance.now() - sigintAt < SAME_CTRL_C_MS) return;
    if (signal === 'SIGINT') sigintAt = performance.now();
    if (shuttingDown) {
      options.logger.warn({ signal }, 'second signal during shutdown: exiting now');
      options.exit(1, SECOND_SIGNAL_FLUSH_WAIT_MS);
      return;
    }
    shuttingDown = true;
    // It cannot fail (the flush's failure is caught); were it to, the process's unhandledRejection handler logs it and exits 1.
    void gracefulShutdown(signal, options).then(() => options.exit(0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

async function gracefulShutdown(signal: NodeJS.Signals, options: ShutdownOptions): Promise<void> {
  const { apiServer, logger } = options;
  logger.info(
    { signal, delay_s: options.delayMs / 1000, timeout_s: options.timeoutMs / 1000 },
    'shutdown started: serving with Connection: close until the delay ends',
  );
  // So that no connection is left idle behind a closed listener.
  apiServer.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => res.setHeader('Connection', 'close'));
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
    sleep(flushBudgetMs, false),
  ]);
  if (!flushed) logger.warn({ budget_ms: flushBudgetMs }, 'shutdown: telemetry flush did not finish in time');
  logger.info('shutdown complete');
}

/**
 * False after `timeoutMs`. close() closes the idle connections; one answered after it without
 * Connection: close (its request came before the signal) would idle until its keep-alive timeout.
 */
function closeAndDrain(server: Server, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sweeper = setInterval(() => server.closeIdleConnections(), 100);
    const finish = (drained: boolean): void => {
      // Stryker disable next-line CallExpression: the process exits once the shutdown ends
      clearInterval(sweeper);
      resolve(drained);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    server.close(() => {
      // Stryker disable next-line CallExpression: the process exits once the shutdown ends
      clearTimeout(timer);
      finish(true);
    });
  });
}
