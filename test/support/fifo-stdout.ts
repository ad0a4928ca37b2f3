// The built service with a stuck stdout: its fd 1 is a FIFO whose reader (standing in for a log
// shipper) can stop reading and start again, as a shell's `node dist/main.js > fifo` would give it.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, constants as fs } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectLogLines, startService, type LogLine, type ServiceProcess } from './service-process';

/** A ServiceProcess whose stdout the test reads only through the FIFO's reader. */
export interface FifoService extends Omit<ServiceProcess, 'logLines' | 'stdout' | 'waitForLog'> {
  readonly lines: LogLine[];
  /** The reader stops reading (the pipe fills up) or reads again. */
  pauseReader(): void;
  resumeReader(): void;
  close(): Promise<void>;
}

/**
 * A FIFO in a directory of its own. The reader is a socket on its read end in this process
 * (non-blocking, so that opening it does not wait for a writer); the write end is blocking, as a
 * pipe's is: once the FIFO is full, a write waits for the reader.
 */
export function openFifo(): { reader: Socket; writeEnd: number; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'product-service-fifo-'));
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const reader = new Socket({ fd: openSync(fifo, fs.O_RDONLY | fs.O_NONBLOCK), readable: true, writable: false });
  const writeEnd = openSync(fifo, 'w');
  return {
    reader,
    writeEnd,
    remove: () => {
      reader.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The reader is a socket on the FIFO's read end in this process; the service gets the write end. */
export async function startWithFifoStdout(env: Record<string, string>): Promise<FifoService> {
  const { reader, writeEnd, remove: removeFifo } = openFifo();
  const lines: LogLine[] = [];
  collectLogLines(reader, lines);
  const service = await startService(env, writeEnd)
    .catch((error: unknown) => {
      removeFifo();
      throw error;
    })
    .finally(() => closeSync(writeEnd));
  return {
    ...service,
    lines,
    pauseReader: () => reader.pause(),
    resumeReader: () => reader.resume(),
    close: async () => {
      await service.stop('SIGKILL');
      removeFifo();
    },
  };
}
