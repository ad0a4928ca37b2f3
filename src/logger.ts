import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: LogLevel;
  service: { name: string; version: string };
  /** Where lines go; stdout by default. Tests pass a stream to read the lines back. */
  destination?: DestinationStream;
}

/**
 * JSON lines on stdout, one object per event. The level is written as a word and the time as
 * ISO-8601 so that a log search needs no lookup table. Lines written inside a traced request carry
 * trace_id, span_id and trace_flags, added by @opentelemetry/instrumentation-pino (telemetry.ts).
 */
export function createLogger(options: LoggerOptions): Logger {
  const logger = pino(
    {
      level: options.level,
      base: { service: options.service.name, version: options.service.version },
      timestamp: isoTimeCachedPerMillisecond(),
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? stdoutDestination(),
  );
  if (options.destination === undefined && options.level !== 'silent') {
    // Lines wait at most this long in the buffer when traffic is too low to fill it. One flush at
    // a time: under sustained load a flush waits for the stream to drain, and stacking them would
    // pile up listeners on the stream.
    let flushing = false;
    setInterval(() => {
      if (flushing) return;
      flushing = true;
      logger.flush(() => {
        flushing = false;
      });
    }, STDOUT_FLUSH_INTERVAL_MS).unref();
  }
  return logger;
}

/**
 * pino's isoTime, formatted once per millisecond instead of once per line: under load many lines
 * share a millisecond, and toISOString was 2% of a traced request's CPU (bench/results).
 */
function isoTimeCachedPerMillisecond(): () => string {
  let formattedAt = -1;
  let formatted = '';
  return () => {
    const now = Date.now();
    if (now !== formattedAt) {
      formattedAt = now;
      formatted = `,"time":"${new Date(now).toISOString()}"`;
    }
    return formatted;
  };
}

/** How long a log line may wait in the stdout buffer. */
export const STDOUT_FLUSH_INTERVAL_MS = 250;

/**
 * Asynchronous and buffered: a request never waits for stdout, and lines are written 4 KiB at a
 * time instead of one write (a thread-pool round trip) per line. The interval above bounds the
 * delay; exitAfterFlush writes what is left before the process exits.
 */
function stdoutDestination(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 4096 });
}

/**
 * Writes out what the asynchronous destination still holds, then exits. process.exit() alone
 * would drop the last lines (the ones that say why the process ended).
 */
export function exitAfterFlush(logger: Logger, code: number): void {
  logger.flush(() => process.exit(code));
  // If stdout is blocked (a full pipe), exit anyway rather than hang.
  setTimeout(() => process.exit(code), 2000).unref();
}
