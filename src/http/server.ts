import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { awaitingContinue, clientErrorDetail, guardConnections, type Refusal } from './connections';
import { requestTarget } from '../request-target';
import { SECURITY_HEADERS } from './security-headers';

/**
 * Keep-alive longer than common balancers' idle timeout, so that the balancer closes idle
 * connections, not the server under its next request; a client trickling its headers or body
 * (slowloris) is cut off with 408 instead of holding a connection.
 */
const SERVER_TIMEOUTS = {
  keepAliveTimeout: 65_000,
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 5_000,
} as const;

/** What each connection may hold while its headers arrive: it sets the memory budget (docs/reliability.md). */
export const MAX_HEADER_SIZE = 8 * 1024;

/**
 * nginx's keepalive_requests before 1.19.10: the answer to the last carries Connection: close, so a
 * client reconnects; a connection pipelining past it is closed (connections.ts), so that it cannot
 * have thousands served from one read while every other waits.
 */
export const MAX_REQUESTS_PER_CONNECTION = 100;

/** Prometheus keeps one connection per scraper: room for many, a bound for anything else. */
export const METRICS_MAX_CONNECTIONS = 64;

/** Production's limits unless given (tests shorten them). */
export interface ServerOptions {
  timeouts?: { [K in keyof typeof SERVER_TIMEOUTS]: number };
}

export interface ServerDependencies {
  logger: Logger;
  maxConnections: number;
  metrics?: Metrics;
}

/** Both ports' HTTP/1.1 server; `listener` gets the requests that pass. */
export function createHttpServer(listener: RequestListener, deps: ServerDependencies, options: ServerOptions = {}): Server {
  const server = createServer(
    {
      ...(options.timeouts ?? SERVER_TIMEOUTS),
      maxHeaderSize: MAX_HEADER_SIZE,
      // Wins over NODE_OPTIONS=--insecure-http-parser (reachable through the chart's extraNodeOptions): framing stays strict.
      insecureHTTPParser: false,
      // Node answers a missing Host with an empty 400 that no counter or log sees; framingProblem() answers it as every refusal.
      requireHostHeader: false,
      // Two Host lines become one with a comma, which no host name has: framingProblem() refuses it.
      joinDuplicateHeaders: true,
    },
    serve,
  );
  server.maxConnections = deps.maxConnections;
  server.maxRequestsPerSocket = MAX_REQUESTS_PER_CONNECTION;
  const connections = guardConnections(server, { logger: deps.logger, metrics: deps.metrics });

  function serve(req: IncomingMessage, res: ServerResponse): void {
    deps.metrics?.requestReceived(req);
    if (!connections.admit(res)) return;
    // maxRequestsPerSocket bounds HTTP/1.1 only: an HTTP/1.0 connection carries one request.
    if (req.httpVersionMinor === 0) res.shouldKeepAlive = false;
    const target = requestTarget(req);
    const refusal = 'refused' in target ? { status: 400, detail: target.refused } : framingProblem(req);
    if (refusal !== undefined) return connections.refuse(res, refusal);
    if (!req.url?.startsWith('/') && 'path' in target) req.url = target.query === undefined ? target.path : `${target.path}?${target.query}`;
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    listener(req, res);
  }

  // Node answers 100 Continue itself unless this event has a listener: sendContinue() does.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitingContinue.add(res);
    // Through emit, so that the instrumentations that patch it (the server span) see the request.
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    connections.refuse(res, { status: 417, detail: 'The only expectation this server meets is 100-continue.' });
  });
  // CONNECT asks for a tunnel; this is no proxy. 405 as for any method a resource does not allow,
  // with an empty Allow: the authority it names is no resource here (RFC 9110 §10.2.1).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    connections.refuse(socket, { status: 405, detail: 'CONNECT is not served: this is not a proxy.', headers: { Allow: '' } });
  });
  return server;
}

/** What RFC 9112 requires refused and Node's parser lets through. */
function framingProblem(req: IncomingMessage): Refusal | undefined {
  if (req.httpVersionMajor !== 1) return { status: 505, detail: clientErrorDetail(505) };
  // RFC 9112 §3.2: 400 for no Host (HTTP/1.1) or more than one.
  const { host } = req.headers;
  if (host?.includes(',') === true || (host === undefined && req.httpVersionMinor === 1)) {
    return { status: 400, detail: 'An HTTP/1.1 request needs exactly one Host header.' };
  }
  // RFC 9112 §6.1: where such a body ends cannot be trusted.
  if (req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) {
    return { status: 400, detail: 'Transfer-Encoding is not defined in HTTP/1.0.' };
  }
  return undefined;
}
