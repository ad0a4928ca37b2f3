// Helpers of the hostile run's raw TCP clients (node:net): "never reads its answers" and "holds a
// half-sent head" need control of the socket, which no HTTP client gives.

/**
 * The end of one client connection, settled once: later calls (the 'close' that follows an
 * 'error', ...) do nothing.
 * @template T
 * @param {import('node:net').Socket} socket @param {number} timeoutMs @param {unknown} timeoutWhy
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
