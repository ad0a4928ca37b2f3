import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: LogLevel;
  service: { name: string; version: string };
  /** Where lines go; stdout by default. Tests pass a stream to read the lines back. */
  destination?: DestinationStream;
  /** Told each time stdout drops a line (its buffer was full). */
  onDroppedLine: () => void;
}

type SonicBoom = ReturnType<typeof pino.destination>;

/** JSON lines on stdout; level as a word and time as ISO-8601 so that a log search needs no lookup table. */
export function createLogger(options: LoggerOptions): Logger {
  // Stryker disable next-line ConditionalExpression,StringLiteral: only tests pass a destination (a stdout beside it is never written to), and at silent nothing is written for a timer to flush
  const stdout = options.destination === undefined ? stdoutDestination(options.level !== 'silent') : undefined;
  const logger = pino(
    {
      level: options.level,
      base: { service: options.service.name, version: options.service.version },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? stdout,
  );
  if (stdout !== undefined) reportDroppedLines(stdout, logger, options.onDroppedLine);
  return logger;
}

/** Counts the lines stdout drops and says how many once it drains: written into an emptied buffer, that line is never dropped. */
function reportDroppedLines(stdout: SonicBoom, logger: Logger, onDroppedLine: () => void): void {
  let unreported = 0;
  // pino writes a line at a time, so each drop is one line.
  stdout.on('drop', () => {
    unreported += 1;
    onDroppedLine();
  });
  stdout.on('drain', () => {
    if (unreported === 0) return;
    const dropped = unreported;
    unreported = 0;
    logger.warn({ dropped_lines: dropped }, 'log lines dropped while stdout was blocked');
  });
}

const STDOUT_FLUSH_INTERVAL_MS = 250;

/** Lines beyond it are dropped and counted: enough to ride out a log shipper's restart. */
const STDOUT_BUFFER_MAX_BYTES = 8 * 1024 * 1024;

export const EXIT_FLUSH_TIMEOUT_MS = 2000;

/**
 * Asynchronous and buffered, so that a stuck stdout (a log shipper not reading) never holds a
 * request, the event loop or the exit: the buffer is bounded, and opening process.stdout makes a
 * pipe non-blocking, so a full pipe is retried from a timer instead of blocking a thread-pool thread
 * that process.exit() would wait for.
 */
function stdoutDestination(periodicFlush: boolean): SonicBoom {
  const stdout = pino.destination({
    dest: process.stdout.fd,
    sync: false,
    minLength: 4096,
    maxLength: STDOUT_BUFFER_MAX_BYTES,
    periodicFlush: periodicFlush ? STDOUT_FLUSH_INTERVAL_MS : 0,
  });
  // pino flushes synchronously after a fatal line and at exit, which on a full pipe waits for the reader
  // forever (https://github.com/pinojs/sonic-boom/issues/65): exitAfterFlush flushes asynchronously instead.
  stdout.flushSync = () => undefined;
  return stdout;
}

/** Exits once stdout took the last lines (the ones that say why), or after `waitMs` without them. */
export function exitAfterFlush(logger: Logger, code: number, waitMs = EXIT_FLUSH_TIMEOUT_MS): void {
  logger.flush(() => process.exit(code));
  // Lines a stuck stdout did not take by then are lost with the process.
  setTimeout(() => process.exit(code), waitMs).unref();
}
