// The built service with a stuck stdout: its fd 1 is a FIFO whose reader (standing in for a log
// shipper) can stop reading and start again, as a shell's `node dist/main.js > fifo` would give it.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, constants as fs } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectLogLines, freePorts, spawnMain, waitUntilHealthy, type LogLine } from './service-process';

export interface FifoService {
  readonly child: ChildProcess;
  readonly port: number;
  readonly metricsPort: number;
  readonly metricsUrl: string;
  /** Every complete line the reader has read (see LogLine). */
  readonly lines: LogLine[];
  /** The reader stops reading (the pipe fills up) or reads again. */
  pauseReader(): void;
  resumeReader(): void;
  readonly exited: Promise<number | string>;
  stderr(): string;
  /** Kills the service if it still runs, closes the reader and removes the FIFO. */
  close(): Promise<void>;
}

/**
 * startService (service-process.ts) with stdout a FIFO instead of a pipe to the test: the reader
 * is a socket on the FIFO's read end in this process, and the service gets the write end as its
 * fd 1. Ports are free ones unless `env` names them.
 */
export async function startWithFifoStdout(env: Record<string, string>): Promise<FifoService> {
  const dir = mkdtempSync(join(tmpdir(), 'product-service-stdout-'));
  const fifo = join(dir, 'stdout');
  execFileSync('mkfifo', [fifo]);
  // Non-blocking, so that opening the read end does not wait for a writer.
  const reader = new Socket({ fd: openSync(fifo, fs.O_RDONLY | fs.O_NONBLOCK), readable: true, writable: false });
  const writeEnd = openSync(fifo, 'w');
  const [apiFree, metricsFree] = await freePorts(2);
  const port = env.PORT !== undefined ? Number(env.PORT) : (apiFree as number);
  const metricsPort = env.METRICS_PORT !== undefined ? Number(env.METRICS_PORT) : (metricsFree as number);
  const child = spawnMain({ PORT: String(port), METRICS_PORT: String(metricsPort), ...env }, writeEnd);
  closeSync(writeEnd);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    reader.destroy();
    rmSync(dir, { recursive: true, force: true });
  };

  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const lines: LogLine[] = [];
  collectLogLines(reader, lines);

  try {
    await waitUntilHealthy(`http://127.0.0.1:${port}`, child, () => stderr);
  } catch (error) {
    await close();
    throw error;
  }
  return {
    child,
    port,
    metricsPort,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    lines,
    pauseReader: () => reader.pause(),
    resumeReader: () => reader.resume(),
    exited,
    stderr: () => stderr,
    close,
  };
}
