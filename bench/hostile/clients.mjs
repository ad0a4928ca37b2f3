// The hostile run's raw TCP clients (node:net): most of its requests are ones no HTTP client would
// send, and "never reads its answers" or "resets mid-body" need control of the socket.
import net from 'node:net';

/**
 * The end of one client connection, settled once: later calls (the 'close' that follows an
 * 'error', ...) do nothing.
 * @template T
 * @param {net.Socket} socket @param {number} timeoutMs @param {unknown} timeoutWhy
 * @param {(why: any) => T} outcome
 */
export function settleOnce(socket, timeoutMs, timeoutWhy, outcome) {
  const { promise: ended, resolve } = Promise.withResolvers();
  let finished = false;
  const finish = (why) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    socket.destroy();
    resolve(outcome(why));
  };
  const timer = setTimeout(() => finish(timeoutWhy), timeoutMs);
  return { ended, finish, finished: () => finished };
}

export function rawExchange(port, payload, { waitMs = 2000 } = {}) {
  const t0 = performance.now();
  const socket = net.connect(port, '127.0.0.1');
  const chunks = [];
  const { ended, finish } = settleOnce(socket, waitMs, null, (closed) => ({
    raw: Buffer.concat(chunks).toString('latin1'),
    closed,
    ms: performance.now() - t0,
  }));
  socket.on('data', (chunk) => chunks.push(chunk));
  socket.on('end', () => finish('FIN'));
  socket.on('error', (err) => finish(err.code === 'ECONNRESET' || err.code === 'EPIPE' ? 'reset' : `error ${err.code}`));
  socket.on('close', () => finish('FIN'));
  socket.write(payload);
  return ended;
}

export function parseResponses(raw) {
  const out = [];
  let at = 0;
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const [statusLine, ...lines] = raw.slice(at, end).split('\r\n');
    const headers = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(statusLine.split(' ')[1]);
    let bodyEnd = end + 4;
    if (status >= 200 && status !== 204 && status !== 304) {
      if (headers['content-length'] !== undefined) bodyEnd += Number(headers['content-length']);
      else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) bodyEnd = raw.indexOf('\r\n0\r\n\r\n', end) + 7;
      else bodyEnd = raw.length; // delimited by the close
    }
    out.push({ status, statusLine, headers, body: raw.slice(end + 4, bodyEnd) });
    at = bodyEnd;
  }
  return out;
}

/** Waits for the socket to connect (or fail): many at once would otherwise overflow the accept backlog unnoticed. */
export const connected = (socket) =>
  new Promise((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('error', () => resolve(false));
  });

/** Goes on after the answer, as a client that ignores it does. */
export function chunkedUpload(port, total) {
  // Half-open allowed: the server's FIN after its answer does not stop this client from sending.
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const chunk = Buffer.alloc(64 * 1024, 'x');
  const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
  let answer = '';
  let bytesSent = 0;
  let bytesSentAtAnswer = NaN;
  let bytesSentAtFin = NaN;
  const { ended, finish, finished } = settleOnce(socket, 30_000, 'timeout', (ending) => ({ answer, bytesSent, bytesSentAtAnswer, bytesSentAtFin, ending }));
  const pump = () => {
    while (!finished() && bytesSent < total) {
      bytesSent += chunk.length;
      if (!socket.write(frame)) return;
    }
    if (bytesSent >= total && !finished()) socket.end('0\r\n\r\n', () => finish('all sent'));
  };
  socket.on('data', (d) => {
    if (answer === '') bytesSentAtAnswer = bytesSent;
    answer += d.toString('latin1');
  });
  socket.on('drain', pump);
  socket.on('end', () => {
    bytesSentAtFin = bytesSent;
  });
  socket.on('error', (err) => finish(`reset by the server (${err.code})`));
  socket.write('POST /product HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n');
  pump();
  return ended;
}
