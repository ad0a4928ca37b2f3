import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { canAnswerOn, clientErrorDetail, guardConnections, type LingeringLimits, type Refusal } from './connections';
import { requestTarget } from './request-target';

/**
 * Server timeouts, chosen for a service behind a load balancer or ingress:
 * - keepAliveTimeout 65 s: longer than the idle timeout of common balancers (AWS ALB and
 *   nginx 60 s), so the balancer, not this server, closes idle connections; otherwise it may
 *   send a request on a connection the server is closing at that instant and get a reset.
 * - headersTimeout 10 s and requestTimeout 30 s: a client that trickles its headers or its body
 *   (slowloris) is cut off with 408 instead of holding a connection (one of MAX_CONNECTIONS) open
 *   indefinitely; the API's headers fit in one packet, and 30 s is ample for a 1 MiB body on a
 *   slow link.
 * - connectionsCheckingInterval 5 s: how often Node enforces the two above (default 30 s).
 */
const SERVER_TIMEOUTS = {
  keepAliveTimeout: 65_000,
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 5_000,
} as const;

/**
 * The largest request head (request line and headers) either port reads, in bytes; larger gets 431.
 * The API's own headers are a few hundred bytes, and what proxies add stays well within it; it is
 * what each connection may hold while its headers arrive, so it sets the memory budget
 * (docs/reliability.md). nginx, Apache and Tomcat default to the same per line.
 */
export const MAX_HEADER_SIZE = 8 * 1024;

/**
 * The most connections the metrics port holds: Prometheus keeps one per scraper, so this leaves
 * room for many and bounds what anything else that reaches the port can make it hold.
 */
export const METRICS_MAX_CONNECTIONS = 64;

/** The limits of both ports' servers; production's unless given (tests shorten them). */
export interface ServerOptions {
  /** SERVER_TIMEOUTS unless given. */
  timeouts?: { [K in keyof typeof SERVER_TIMEOUTS]: number };
  /** LINGERING_CLOSE (connections.ts) unless given. */
  lingeringClose?: LingeringLimits;
}

export interface ServerDependencies {
  logger: Logger;
  /** The most connections the server holds at once; past it, Node closes new ones as they arrive. */
  maxConnections: number;
  /** Counts what the server refuses before `listener` (the API port's; see ConnectionGuardOptions). */
  metrics?: Pick<Metrics, 'countRefusedRequest'>;
  /** Called with every request the server receives, first (the API port's: its recorded duration starts there). */
  onRequest?: (req: IncomingMessage) => void;
}

/**
 * The HTTP/1.1 server of each of the service's ports: deliberate timeouts, what it refuses
 * answered in the service's error shape, connections closed without losing their last answer,
 * pipelining bounded (the connection bookkeeping is connections.ts's). `listener` gets the
 * requests that pass: the Koa application's callback on the API port, the scrape on the metrics port.
 */
export function createHttpServer(listener: RequestListener, deps: ServerDependencies, options: ServerOptions = {}): Server {
  const server = createServer(
    {
      ...(options.timeouts ?? SERVER_TIMEOUTS),
      maxHeaderSize: MAX_HEADER_SIZE,
      // Node would answer a missing Host with an empty 400; serve() answers it as a problem.
      requireHostHeader: false,
    },
    serve,
  );
  server.maxConnections = deps.maxConnections;
  const connections = guardConnections(server, { logger: deps.logger, metrics: deps.metrics, lingeringClose: options.lingeringClose });

  function serve(req: IncomingMessage, res: ServerResponse): void {
    deps.onRequest?.(req);
    // Requests Node still parses from a connection that is closing cannot be answered: not served.
    if (!canAnswerOn(req.socket)) return;
    if (!connections.admit(req)) return;
    const target = requestTarget(req);
    const refusal = 'refused' in target ? { status: 400, detail: target.refused } : framingProblem(req);
    if (refusal !== undefined) return connections.refuse(res, refusal);
    // What the listener (Koa, the scrape) parses is the path requestTarget found, in origin-form.
    if (!req.url?.startsWith('/') && 'path' in target) req.url = target.query === undefined ? target.path : `${target.path}?${target.query}`;
    listener(req, res);
  }

  // Node answers 100 Continue itself unless this event has a listener: sendContinue() sends it
  // once the body is going to be read, so a body that is refused anyway is never asked for.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    connections.awaitContinue(res);
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

/** What RFC 9112 requires a server to refuse and Node's parser lets through. */
function framingProblem(req: IncomingMessage): Refusal | undefined {
  // Node's parser accepts HTTP/0.9 and HTTP/2.0 request lines (an HTTP/2 client speaks a different protocol).
  if (req.httpVersionMajor !== 1) return { status: 505, detail: clientErrorDetail(505) };
  // Node keeps the first of several Host lines; RFC 9112 §3.2 requires 400 for none (HTTP/1.1) or more than one.
  let hosts = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.length === 4 && raw[i]?.toLowerCase() === 'host') hosts += 1;
  if (hosts > 1 || (hosts === 0 && req.httpVersionMinor === 1)) {
    return { status: 400, detail: 'An HTTP/1.1 request needs exactly one Host header.' };
  }
  // RFC 9112 §6.1: HTTP/1.0 has no Transfer-Encoding, so the framing of such a message is faulty:
  // where its body ends cannot be trusted, so it is refused, and the connection closed after it.
  if (req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) {
    return { status: 400, detail: 'Transfer-Encoding is not defined in HTTP/1.0.' };
  }
  return undefined;
}
