import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: LogLevel;
  service: { name: string; version: string };
  /** Where lines go; stdout by default. Tests pass a stream to read the lines back. */
  destination?: DestinationStream;
  /** Told how many lines stdout dropped, each time it drops some (its buffer was full). */
  onDroppedLines?: (lines: number) => void;
}

/** pino's asynchronous destination (sonic-boom, a dependency of pino's). */
type SonicBoom = ReturnType<typeof pino.destination>;

/** The stdout destination of each logger createLogger made, for exitAfterFlush. */
const stdoutOf = new WeakMap<Logger, SonicBoom>();

/**
 * JSON lines on stdout, one object per event. The level is written as a word and the time as
 * ISO-8601 so that a log search needs no lookup table. Lines written inside a traced request carry
 * trace_id, span_id and trace_flags, added by @opentelemetry/instrumentation-pino (observability/telemetry.ts).
 */
export function createLogger(options: LoggerOptions): Logger {
  const stdout = options.destination === undefined ? stdoutDestination(options.level !== 'silent') : undefined;
  const logger = pino(
    {
      level: options.level,
      base: { service: options.service.name, version: options.service.version },
      timestamp: isoTimeCachedPerMillisecond(),
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? stdout,
  );
  if (stdout !== undefined) {
    stdoutOf.set(logger, stdout);
    reportDroppedLines(stdout, logger, options.onDroppedLines);
  }
  return logger;
}

/**
 * Counts the lines stdout drops (pino writes one line per write) and, once stdout has taken the
 * backlog (sonic-boom's 'drain': its buffer is nearly empty again), says in one warn line how many
 * were lost since the last such line. Written into an emptied buffer, that line is never dropped.
 */
function reportDroppedLines(stdout: SonicBoom, logger: Logger, onDroppedLines: ((lines: number) => void) | undefined): void {
  let unreported = 0;
  stdout.on('drop', (data: string | Buffer) => {
    const lines = countLines(data);
    unreported += lines;
    onDroppedLines?.(lines);
  });
  stdout.on('drain', () => {
    if (unreported === 0) return;
    const dropped = unreported;
    unreported = 0;
    logger.warn({ dropped_lines: dropped }, 'log lines dropped while stdout was blocked');
  });
}

function countLines(data: string | Buffer): number {
  let lines = 0;
  for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) lines += 1;
  return Math.max(lines, 1);
}

/**
 * pino's isoTime, formatted once per millisecond instead of once per line: under load many lines
 * share a millisecond, and toISOString shows in the profile of a traced request.
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
const STDOUT_FLUSH_INTERVAL_MS = 250;

/**
 * The most bytes of log lines held for stdout; lines beyond it are dropped and counted. Tens of
 * thousands of request lines: enough to ride out a log shipper's restart at a normal request
 * rate, for a small share of the chart's memory limit.
 */
const STDOUT_BUFFER_MAX_BYTES = 8 * 1024 * 1024;

/** How long exitAfterFlush waits for stdout to take the last lines before it drops them and exits. */
export const EXIT_FLUSH_TIMEOUT_MS = 2000;

/**
 * Asynchronous and buffered: a request never waits for stdout, and lines are written 4 KiB at a
 * time instead of one write (a thread-pool round trip) per line, at most STDOUT_FLUSH_INTERVAL_MS
 * after they were logged (`periodicFlush`: one flush at a time, none while a write is under way).
 *
 * A stuck stdout (a log shipper that stopped reading the pipe) must never hold a request, the
 * event loop or the exit:
 * - the buffer is bounded (`maxLength`): a line that would overflow it is dropped and counted;
 * - fd 1 is made non-blocking by opening process.stdout, which for a pipe or a socket sets
 *   O_NONBLOCK on it (libuv's uv_pipe_open; a file or a terminal is left as it is). A write to a
 *   full pipe then fails with EAGAIN, which sonic-boom retries every 100 ms from a timer, instead of
 *   blocking a thread-pool thread in write(2): process.exit() waits for the thread pool's threads,
 *   so one stuck there never lets the process exit;
 * - flushSync, which pino calls after a fatal line and from its process 'exit' handler, does
 *   nothing before the process exits (exitAfterFlush follows every fatal line and flushes
 *   asynchronously); at exit it writes what the pipe takes at once and drops the rest. sonic-boom
 *   would otherwise retry EAGAIN forever, the main thread asleep between tries. Upstream:
 *   https://github.com/pinojs/sonic-boom/issues/65 (the bound it asks for, maxWriteRetries, is
 *   https://github.com/pinojs/sonic-boom/pull/250; the sonic-boom 4 that pino 10 uses lacks it).
 */
function stdoutDestination(periodicFlush: boolean): SonicBoom {
  let exiting = false;
  // Before pino's own 'exit' handler, whichever was registered first.
  process.prependOnceListener('exit', () => (exiting = true));
  const stdout = pino.destination({
    dest: process.stdout.fd,
    sync: false,
    minLength: 4096,
    maxLength: STDOUT_BUFFER_MAX_BYTES,
    periodicFlush: periodicFlush ? STDOUT_FLUSH_INTERVAL_MS : 0,
    // While running, a full pipe is waited for (asynchronously); while exiting, it is not.
    retryEAGAIN: () => !exiting,
  });
  const flushSync = stdout.flushSync.bind(stdout);
  stdout.flushSync = () => {
    if (!exiting) return;
    try {
      flushSync();
    } catch {
      // EAGAIN: the pipe is full and what it did not take is lost with the process.
    }
  };
  return stdout;
}

/**
 * Writes out what the asynchronous destination still holds, then exits. process.exit() alone
 * would drop the last lines (the ones that say why the process ended). If stdout has not taken
 * them within `waitMs` (a stuck pipe), they are dropped and the process exits all the same.
 */
export function exitAfterFlush(logger: Logger, code: number, waitMs = EXIT_FLUSH_TIMEOUT_MS): void {
  logger.flush(() => process.exit(code));
  setTimeout(() => {
    // destroy() discards the buffer, and pino's exit handler skips a destroyed stream: nothing is
    // left to write while the process exits.
    stdoutOf.get(logger)?.destroy();
    process.exit(code);
  }, waitMs).unref();
}
