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
 * ISO-8601 so that a log search needs no lookup table. trace_id/span_id are added to lines
 * written inside a traced request by @opentelemetry/instrumentation-pino (see telemetry.ts).
 */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: options.service.name, version: options.service.version },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    // Asynchronous writes: a request never waits for stdout. pino flushes what is pending when
    // the process exits, including through process.exit() at the end of a graceful shutdown.
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
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
