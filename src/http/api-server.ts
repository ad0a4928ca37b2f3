import { createServer, ServerResponse, STATUS_CODES, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import { refusalReason, type Metrics } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';

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

/**
 * How long, and for how many bytes, a connection the server closes keeps being read (and what it
 * reads thrown away) after its last answer, as nginx's lingering_close does. Closing a socket that
 * still has unread bytes makes the kernel send a reset, and a reset makes the client's kernel
 * discard the answer it has not read yet: a client still sending a body we refused (413) would
 * never see why. 5 s is longer than a client needs to notice the answer, and as long as nginx's
 * lingering_timeout; 32 MiB lets a client that writes its whole body before reading (most simple
 * clients) finish a body of up to 32 times the default limit. Beyond either, the client is
 * sending what it was told is refused, and the connection is reset.
 */
export const LINGERING_CLOSE = { maxMs: 5_000, maxBytes: 32 * 1024 * 1024 } as const;

/**
 * The most requests one connection may deliver within one turn of the event loop, i.e. send
 * pipelined without waiting for answers; the connection of a client past it is closed. Node hands
 * over every request of a read at once (libuv reads up to 32 × 64 KiB per turn), so without a
 * bound one pipelining client is served thousands of requests in a row while every other waits,
 * and holds the answers it does not read in memory. 64 is more than any client pipelines for a
 * reason (browsers do not pipeline at all). Node still parses the rest of the read it was in:
 * there is no public way to stop its parser within a read.
 */
export const MAX_REQUESTS_PER_CONNECTION_PER_TURN = 64;

export interface ApiServerOptions {
  /** SERVER_TIMEOUTS unless given (tests shorten them). */
  timeouts?: { [K in keyof typeof SERVER_TIMEOUTS]: number };
  /** LINGERING_CLOSE unless given. */
  lingeringClose?: LingeringLimits;
}

interface LingeringLimits {
  maxMs: number;
  maxBytes: number;
}

/** What the server tracks per connection. */
interface Connection {
  /** The turn of the event loop its last request arrived in (see currentTurn), and how many arrived in it. */
  turn: number;
  requestsInTurn: number;
  /** The status the server answered the connection with before closing it, outside any request's answer (408, 400, 431). */
  closedWith: number | undefined;
}

const connections = new WeakMap<Duplex, Connection>();

/**
 * Turns of the event loop, counted while requests arrive: the count moves on in the check phase
 * after the I/O of a turn, so requests of one connection that share a turn came in the same reads.
 */
let turn = 0;
let turnEnding = false;

function currentTurn(): number {
  if (!turnEnding) {
    turnEnding = true;
    setImmediate(endTurn);
  }
  return turn;
}

function endTurn(): void {
  turn += 1;
  turnEnding = false;
}

/** Counts a request of the connection in the current turn; true once there are too many. */
function pipelinedTooMany(connection: Connection): boolean {
  const now = currentTurn();
  if (connection.turn !== now) {
    connection.turn = now;
    connection.requestsInTurn = 0;
  }
  connection.requestsInTurn += 1;
  return connection.requestsInTurn > MAX_REQUESTS_PER_CONNECTION_PER_TURN;
}

/** Responses whose client waits for 100 Continue before sending the body (Expect: 100-continue). */
const awaitingContinue = new WeakSet<ServerResponse>();

/**
 * The API port's HTTP/1.1 server: deliberate timeouts, what it refuses answered in the service's
 * error shape, connections closed without losing their last answer, pipelining bounded. `listener`
 * is the Koa application's callback.
 */
export function createApiServer(
  listener: RequestListener,
  logger: Logger,
  metrics: Pick<Metrics, 'countRefusedRequest' | 'requestReceived'>,
  options: ApiServerOptions = {},
): Server {
  const timeouts = options.timeouts ?? SERVER_TIMEOUTS;
  const lingering = options.lingeringClose ?? LINGERING_CLOSE;
  const server = createServer(
    {
      ...timeouts,
      // Node would answer a missing Host with an empty 400; serve() answers it as a problem.
      requireHostHeader: false,
    },
    serve,
  );

  server.on('connection', (socket: Socket) => {
    connections.set(socket, { turn: -1, requestsInTurn: 0, closedWith: undefined });
    // Node closes a connection after an answer that says Connection: close by calling destroySoon(),
    // which destroys the socket as soon as the answer is written: it lingers instead.
    socket.destroySoon = () => closeLingering(socket, lingering);
    // A response still unanswered when its connection closes never will be. The server span ends
    // on the response's 'close', which Node emits right after this listener, before Koa hears of
    // it: the status is set here so that the span says 499 (or 408) as the histogram will.
    socket.on('close', () => {
      const response = currentResponse(socket);
      if (response !== undefined && !response.headersSent) response.statusCode = closedConnectionStatus(socket);
    });
  });

  function serve(req: IncomingMessage, res: ServerResponse): void {
    metrics.requestReceived(req);
    const socket = req.socket;
    // Requests Node still parses from a connection that is closing cannot be answered: not served.
    if (!canAnswerOn(socket)) return;
    const connection = connections.get(socket);
    if (connection !== undefined && pipelinedTooMany(connection)) {
      logger.warn({ limit: MAX_REQUESTS_PER_CONNECTION_PER_TURN }, 'closed a connection that pipelined too many requests');
      metrics.countRefusedRequest('pipelining_limit');
      socket.destroy();
      return;
    }
    const refusal = framingProblem(req);
    if (refusal !== undefined) {
      logger.debug({ status: refusal.status }, 'rejected a malformed or incomplete request');
      metrics.countRefusedRequest(refusalReason(refusal.status));
      answerAndClose(res, refusal.status, refusal.detail, {}, lingering);
      return;
    }
    listener(req, res);
  }

  // Node answers 100 Continue itself unless this event has a listener: sendContinue() sends it
  // once the body is going to be read, so a body that is refused anyway is never asked for.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitingContinue.add(res);
    // Through emit, so that the instrumentations that patch it (the server span) see the request.
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    logger.debug({ status: 417 }, 'rejected a malformed or incomplete request');
    metrics.countRefusedRequest('expectation_failed');
    answerAndClose(res, 417, 'The only expectation this server meets is 100-continue.', {}, lingering);
  });
  // CONNECT asks for a tunnel; this is no proxy. 405 as for any method a resource does not allow,
  // with an empty Allow: the authority it names is no resource here (RFC 9110 §10.2.1).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    logger.debug({ status: 405 }, 'rejected a malformed or incomplete request');
    metrics.countRefusedRequest('connect');
    answerAndClose(socket, 405, 'CONNECT is not served: this is not a proxy.', { Allow: '' }, lingering);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerClientError(error, socket, logger, metrics, lingering));
  return server;
}

/** Whether the connection can still carry an answer: not closed, and not already answered and ended by the server. */
export function canAnswerOn(socket: Duplex): boolean {
  return !socket.destroyed && !socket.writableEnded;
}

/**
 * The status a request is recorded with when its connection can no longer carry its answer: the
 * one the server answered the connection with before closing it (408 when the request took too
 * long), or 499 (nginx's "client closed request") when the client went away.
 */
export function closedConnectionStatus(socket: Duplex): number {
  return connections.get(socket)?.closedWith ?? 499;
}

/** Sends 100 Continue if the client waits for it; called when the request body is about to be read. */
export function sendContinue(res: ServerResponse): void {
  if (awaitingContinue.delete(res)) res.writeContinue();
}

interface Refusal {
  status: number;
  detail: string;
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

/** What Node adds to a parser error (documented with the 'clientError' event). */
type ParserError = NodeJS.ErrnoException & { bytesParsed?: number; rawPacket?: Buffer };

/**
 * Node's parser rejects broken HTTP before any handler runs: 400 for a malformed request, 431 for
 * headers over the size limit, 408 for a request that took too long, 505 for an HTTP version it
 * cannot parse. Node would answer with an empty body; this answers with the same statuses in the
 * problem+json shape every other error uses, and records the status for the request in flight.
 */
function answerClientError(
  error: ParserError,
  socket: Duplex,
  logger: Logger,
  metrics: Pick<Metrics, 'countRefusedRequest'>,
  lingering: LingeringLimits,
): void {
  // Already answered and closing: the lingering close ends it (the parser reports what follows as errors).
  if (socket.writableEnded && error.code !== 'ECONNRESET') return;
  // The client reset the connection or closed it mid-request: nobody is left to answer.
  if (error.code === 'ECONNRESET' || error.code === 'HPE_INVALID_EOF_STATE') {
    socket.destroy();
    return;
  }
  // Node's own rule: write nothing if the peer is gone or a response has already begun on this socket.
  if (!socket.writable || currentResponse(socket)?.headersSent === true) {
    socket.destroy();
    return;
  }
  const status = clientErrorStatus(error);
  logger.debug({ status, code: error.code }, 'rejected a malformed or incomplete request');
  // A request the application already has (a 408 mid-body) is recorded there with this status.
  if (currentResponse(socket) === undefined) metrics.countRefusedRequest(refusalReason(status));
  const connection = connections.get(socket);
  if (connection !== undefined) connection.closedWith = status;
  answerAndClose(socket, status, clientErrorDetail(status), {}, lingering);
}

/** The response Node is writing, or waiting to write, on this connection (Node's own bookkeeping). */
function currentResponse(socket: Duplex): ServerResponse | undefined {
  return (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
}

function clientErrorStatus(error: ParserError): number {
  if (error.code === 'HPE_HEADER_OVERFLOW') return 431;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (error.code === 'HPE_INVALID_VERSION' && namesAnotherVersion(error)) return 505;
  return 400;
}

/**
 * Whether the parser refused a well-formed request line naming a version it does not parse
 * (HTTP/3.0), rather than broken syntax it reports the same way (a bare LF after HTTP/1.1).
 */
function namesAnotherVersion(error: ParserError): boolean {
  const { rawPacket: raw, bytesParsed: at } = error;
  if (raw === undefined || at === undefined) return false;
  const lineStart = at > 0 ? raw.lastIndexOf(0x0a, at - 1) + 1 : 0;
  return /^\S+ \S+ HTTP\/\d\.\d\r\n/.test(raw.toString('latin1', lineStart, at + 2));
}

function clientErrorDetail(status: number): string {
  if (status === 431) return 'The request headers are larger than the server accepts.';
  if (status === 408) return 'The request was not received in time.';
  if (status === 505) return 'This server speaks HTTP/1.0 and HTTP/1.1 only.';
  return 'The request is not valid HTTP/1.1.';
}

/**
 * Answers what the server refuses before (or instead of) handing a request to the application,
 * then closes the connection.
 * Through the response when there is one (Node keeps it in order behind earlier pipelined
 * answers, then closes lingering), straight to the socket otherwise.
 */
function answerAndClose(
  target: ServerResponse | Duplex,
  status: number,
  detail: string,
  extraHeaders: Record<string, string>,
  lingering: LingeringLimits,
): void {
  const answer = problemAnswer(status, detail, { ...extraHeaders, Connection: 'close' });
  if (target instanceof ServerResponse) {
    sendProblem(target, answer);
    return;
  }
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n`;
  for (const [name, value] of Object.entries(answer.headers)) head += `${name}: ${value}\r\n`;
  target.write(`${head}\r\n${answer.body}`);
  closeLingering(target, lingering);
}

/**
 * Closes a connection after its last answer the way nginx's lingering_close does: FIN after the
 * answer, then what the client still sends is read and thrown away, unparsed, until it closes its
 * side or the limits (LINGERING_CLOSE) run out.
 */
function closeLingering(socket: Duplex, limits: LingeringLimits): void {
  // Ended already: this close is under way (or the client has closed its side too).
  if (!canAnswerOn(socket)) return;
  socket.end();
  // Node's parser reads the socket through its 'data' listener; the rest is not parsed, only dropped.
  socket.removeAllListeners('data');
  let discarded = 0;
  socket.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > limits.maxBytes) socket.destroy();
  });
  socket.on('error', () => socket.destroy());
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), limits.maxMs);
  socket.once('close', () => clearTimeout(timer));
}
