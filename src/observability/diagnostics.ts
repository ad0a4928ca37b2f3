import type { DiagLogger } from '@opentelemetry/api';
import { write as writeFile } from 'node:fs';
import { format } from 'node:util';

/**
 * The SDK's diagnostics on stderr (stdout carries only JSON lines), asynchronously so a stalled pipe
 * never blocks the event loop; repeats (an export failing every batch) and overflow are counted instead.
 */
export function stderrDiagLogger(fd = 2): DiagLogger {
  const REPEAT_WINDOW_MS = 60_000;
  const QUEUE_LIMIT = 64;
  const lastWritten = new Map<string, { at: number; repeats: number }>();
  const queue: string[] = [];
  let writing = false;
  let dropped = 0;
  const pump = (): void => {
    const line = queue.shift();
    if (line === undefined) {
      writing = false;
      return;
    }
    writing = true;
    writeFile(fd, line, pump);
  };
  const write =
    (level: string) =>
    (message: string, ...args: unknown[]): void => {
      const text = format(message, ...args).replace(/\s*\n\s*/g, ' ');
      const now = Date.now();
      const last = lastWritten.get(text);
      if (last !== undefined && now - last.at < REPEAT_WINDOW_MS) {
        last.repeats += 1;
        return;
      }
      if (lastWritten.size > 1000) lastWritten.clear();
      lastWritten.set(text, { at: now, repeats: 0 });
      const repeated = last !== undefined && last.repeats > 0 ? ` (and ${last.repeats} times more in the last minute)` : '';
      if (queue.length >= QUEUE_LIMIT) {
        dropped += 1;
        return;
      }
      const droppedNote = dropped > 0 ? ` (${dropped} earlier diagnostics dropped: stderr was not being read)` : '';
      dropped = 0;
      queue.push(`opentelemetry ${level}: ${text}${repeated}${droppedNote}\n`);
      if (!writing) pump();
    };
  return { error: write('error'), warn: write('warn'), info: write('info'), debug: write('debug'), verbose: write('verbose') };
}
