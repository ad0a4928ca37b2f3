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

const isProblem = (res) => (res.headers['content-type'] ?? '').startsWith('application/problem+json');

/** "400 problem+json nosniff no-store, closed (FIN) in 3 ms": one answer in table length. */
function describeExchange(exchange, responses) {
  const parts = responses.map((res) => {
    const type = res.headers['content-type'];
    const shortType = type === undefined ? 'no type' : type.replace(/^application\//, '').replace(/;.*$/, '');
    const headers = `${res.headers['x-content-type-options'] === 'nosniff' ? ' nosniff' : ''}${res.headers['cache-control'] === 'no-store' ? ' no-store' : ''}`;
    return `${res.status} ${shortType}${headers}`;
  });
  if (parts.length === 0) parts.push(exchange.raw.length ? `unparsed ${JSON.stringify(exchange.raw.slice(0, 40))}` : 'nothing');
  const close = exchange.closed ? `closed (${exchange.closed}) in ${Math.round(exchange.ms)} ms` : `left open ${Math.round(exchange.ms)} ms`;
  return `${parts.join(' + ')}; ${close}`;
}

export async function rawCase(port, { sent, payload, status, mustClose = true }) {
  const exchange = await rawExchange(port, payload);
  const responses = parseResponses(exchange.raw);
  const [first] = responses;
  const failures = [];
  if (first === undefined) failures.push(`expected ${status}, got no answer`);
  else {
    if (first.status !== status) failures.push(`expected ${status}`);
    if (first.status >= 400 && !isProblem(first)) failures.push('not problem+json');
    if (first.headers['x-content-type-options'] !== 'nosniff') failures.push('no nosniff');
    if (first.headers['cache-control'] !== 'no-store') failures.push('no Cache-Control: no-store');
  }
  if (responses.length > 1) failures.push(`${responses.length} answers: bytes after the first request were parsed as another`);
  if (mustClose && !exchange.closed) failures.push('connection not closed');
  return { sent, got: describeExchange(exchange, responses), failures, details: { raw: exchange.raw.slice(0, 600), closed: exchange.closed } };
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

/**
 * Paused before it connects: an answer the server's reset destroys in the kernel is lost, exactly
 * as it would be for a naive client that writes the whole body before reading.
 */
export function writeAllThenRead(port, size) {
  const socket = net.connect(port, '127.0.0.1');
  socket.pause();
  let answer = '';
  let bytesSent = 0;
  const { ended, finish, finished } = settleOnce(socket, 30_000, 'timeout', (ending) => ({ answer, bytesSent, ending }));
  socket.on('error', (err) => finish(`reset (${err.code})${answer ? ' after the answer' : ''}`));
  socket.on('data', (d) => {
    answer += d.toString('latin1');
  });
  socket.on('end', () => finish('FIN'));
  const chunk = Buffer.alloc(256 * 1024, 'x');
  socket.write(`POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${size}\r\n\r\n`);
  const pump = () => {
    while (!finished() && bytesSent < size) {
      const n = Math.min(chunk.length, size - bytesSent);
      bytesSent += n;
      const last = bytesSent === size;
      // Reading starts once the last byte is handed to the kernel.
      if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n), last ? () => socket.resume() : undefined)) return;
    }
  };
  socket.on('drain', pump);
  pump();
  return ended;
}
