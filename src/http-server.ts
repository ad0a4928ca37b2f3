import { createServer, STATUS_CODES, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from './logger';
import { problem, PROBLEM_CONTENT_TYPE } from './problem';

/**
 * Server timeouts, chosen for a service behind a load balancer or ingress:
 * - keepAliveTimeout 65 s: longer than the idle timeout of common balancers (AWS ALB and
 *   nginx 60 s), so the balancer, not this server, closes idle connections; otherwise it may
 *   send a request on a connection the server is closing at that instant and get a reset.
 * - headersTimeout 20 s and requestTimeout 30 s: a client that trickles its headers or its body
 *   (slowloris) is cut off with 408 instead of holding a connection open indefinitely; 30 s is
 *   ample for a 1 MiB body on a slow link.
 * - connectionsCheckingInterval 5 s: how often Node enforces the two above (default 30 s).
 */
export const SERVER_TIMEOUTS = {
  keepAliveTimeout: 65_000,
  headersTimeout: 20_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 5_000,
} as const;

/** An HTTP/1.1 server with deliberate timeouts that answers malformed requests in the service's error shape. */
export function createHttpServer(listener: RequestListener, logger: Logger): Server {
  const server = createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersTimeout,
      requestTimeout: SERVER_TIMEOUTS.requestTimeout,
      keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeout,
      connectionsCheckingInterval: SERVER_TIMEOUTS.connectionsCheckingInterval,
    },
    listener,
  );
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerClientError(error, socket, logger));
  return server;
}

/**
 * Node's parser rejects broken HTTP before any handler runs: 400 for a malformed request, 431 for
 * headers over the size limit, 408 for a request that took too long. Node would answer with an
 * empty body; this answers with the same statuses in the problem+json shape every other error uses.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex, logger: Logger): void {
  // Node's own rule: write nothing if the peer is gone or a response has already begun on this socket.
  const response = (socket as Duplex & { _httpMessage?: { headersSent: boolean } })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  logger.debug({ status, code: error.code }, 'rejected a malformed or incomplete request');
  const body = JSON.stringify(problem(status, clientErrorDetail(status)));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'X-Content-Type-Options: nosniff\r\n' +
      'Connection: close\r\n\r\n' +
      body,
  );
}

function clientErrorDetail(status: number): string {
  if (status === 431) return 'The request headers are larger than the server accepts.';
  if (status === 408) return 'The request was not received in time.';
  return 'The request is not valid HTTP/1.1.';
}

/** Resolves once the server listens; rejects (e.g. EADDRINUSE) instead of emitting an unhandled error. */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
