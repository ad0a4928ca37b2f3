import { once } from 'node:events';
import { connect } from 'node:net';
import { vi } from 'vitest';

/**
 * Sends raw bytes on a fresh TCP connection and resolves with everything the server wrote
 * until it closed the connection (or `timeoutMs` passed). For requests no HTTP client would send.
 */
export function rawExchange(port: number, payload: string | Buffer, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The server may reset after answering (unread request bytes); what it wrote still counts.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') return;
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.write(payload);
  });
}

export interface ParsedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses the first HTTP/1.1 response in `raw` (Content-Length bodies only: all this service sends on errors). */
export function parseResponse(raw: string): ParsedResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no complete response in: ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine = '', ...headerLines] = raw.slice(0, end).split('\r\n');
  const status = Number(statusLine.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  return { status, headers, body: raw.slice(end + 4, end + 4 + length) };
}

/**
 * A TCP connection to write a request in steps (part of a body, a pause, the rest) and watch
 * what comes back. EPIPE and resets are expected from a server that closes, and not errors.
 */
export async function openRaw(port: number) {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  let raw = '';
  socket.on('data', (chunk: Buffer) => {
    raw += chunk.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    received: (): string => raw,
    /** Resolves when the connection has closed (by either side, or by a reset). */
    closed,
    /** Resolves with what was received once `predicate` holds for it; rejects after `timeoutMs` or when the connection closes first. */
    waitFor: async (predicate: (raw: string) => boolean, timeoutMs = 5000): Promise<string> => {
      // false: the connection closed without `predicate` holding; nothing more can arrive.
      const held = await vi.waitFor(
        () => {
          if (predicate(raw)) return true;
          if (socket.destroyed) return false;
          throw new Error(`timed out; received: ${JSON.stringify(raw.slice(0, 300))}`);
        },
        // Short: some tests time what follows the answer.
        { timeout: timeoutMs, interval: 5 },
      );
      if (!held) throw new Error(`connection closed; received: ${JSON.stringify(raw.slice(0, 300))}`);
      return raw;
    },
  };
}
