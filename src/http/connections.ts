/**
 * What a node:http server keeps about each of its connections, and the one way a request is
 * refused before the application sees it. guardConnections() sets it up on one server (each port's,
 * in server.ts): per connection, the pipelining bound, the status the server closed it with,
 * lingering close, and the answers to what Node's parser rejects. The Koa middleware and
 * request-body ask about a request's connection through canAnswerOn, closedConnectionStatus and
 * sendContinue.
 */
import { ServerResponse, STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import { refusalReason, type Metrics } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';
import { TRACE_RESPONSE, traceIdOf, traceResponse } from './trace-response';

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
const LINGERING_CLOSE = { maxMs: 5_000, maxBytes: 32 * 1024 * 1024 } as const;

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

export interface LingeringLimits {
  maxMs: number;
  maxBytes: number;
}

/** A request (or connection) refused before the application sees it. */
export interface Refusal {
  /** The status answered in problem+json; undefined closes the connection without an answer. */
  readonly status: number | undefined;
  /** The problem's detail, and the log line's: why it was refused. */
  readonly detail: string;
  /** Headers the answer needs besides the problem's own, e.g. Allow on a 405. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Node's parser error code, when its parser rejected the request. */
  readonly code?: string;
  /**
   * The request had reached the application (a 408 while its body was being read): the
   * application records it too, with this status, in the histogram, the span and its log line.
   */
  readonly inApplication?: boolean;
}

/** The log line of every refusal: at debug when answered, at warn when the connection is closed unanswered. */
export const REFUSAL_LOG_MESSAGE = 'refused a request before the application';

interface ConnectionGuard {
  /** Counts `req` against its connection's pipelining bound; past it, the connection is refused (closed) and false returned. */
  admit(req: IncomingMessage): boolean;
  /**
   * Every refusal goes through here: one log line, then the problem+json answer and the close.
   * The answer goes through the response when there is one (Node keeps it in order behind
   * earlier pipelined answers, then closes lingering), straight to the socket otherwise.
   */
  refuse(target: ServerResponse | Duplex, refusal: Refusal): void;
  /** Marks a response whose client waits for 100 Continue before it sends the body (see sendContinue). */
  awaitContinue(res: ServerResponse): void;
}

export interface ConnectionGuardOptions {
  logger: Logger;
  /** Counts each refusal by reason (product_service_http_requests_refused_total); the API port's only, not the metrics port's. */
  metrics?: Pick<Metrics, 'countRefusedRequest'>;
  /** LINGERING_CLOSE unless given (tests shorten it). */
  lingeringClose?: LingeringLimits;
}

/** What is kept per connection, on the socket itself under a key only this module knows. */
interface ConnectionState {
  /** The turn of the event loop its last request arrived in (see currentTurn), and how many arrived in it. */
  turn: number;
  requestsInTurn: number;
  /** The status the server answered the connection with before closing it, outside any request's answer (408, 400, 431). */
  closedWith: number | undefined;
  /** The response whose client waits for 100 Continue; one at most, since the client sends nothing more until then. */
  awaitingContinue: ServerResponse | undefined;
}

const STATE = Symbol('product-service connection state');
type GuardedSocket = Duplex & { [STATE]?: ConnectionState };

function stateOf(socket: Duplex): ConnectionState | undefined {
  return (socket as GuardedSocket)[STATE];
}

/**
 * Sets the bookkeeping up on `server`: every connection it accepts gets its state, lingers when
 * Node closes it, and gives a request it can no longer answer its final status; what Node's parser
 * rejects is answered as a problem. State is per server and per connection: nothing is shared
 * between servers.
 */
export function guardConnections(server: Server, options: ConnectionGuardOptions): ConnectionGuard {
  const { logger } = options;
  const lingering = options.lingeringClose ?? LINGERING_CLOSE;

  // Turns of the event loop, counted while requests arrive: the count moves on in the check phase
  // after the I/O of a turn, so requests of one connection that share a turn came in the same reads.
  let turn = 0;
  let turnEnding = false;
  const currentTurn = (): number => {
    if (!turnEnding) {
      turnEnding = true;
      setImmediate(() => {
        turn += 1;
        turnEnding = false;
      });
    }
    return turn;
  };

  const refuse = (target: ServerResponse | Duplex, refusal: Refusal): void => {
    const { status, detail, code, inApplication } = refusal;
    // A request the application already has (a 408 mid-body) is recorded there, with this status.
    if (inApplication !== true) options.metrics?.countRefusedRequest(status === undefined ? 'pipelining_limit' : refusalReason(status));
    if (status === undefined) {
      logger.warn({ detail, code }, REFUSAL_LOG_MESSAGE);
      (target instanceof ServerResponse ? target.req.socket : target).destroy();
      return;
    }
    // The id of the request the answer is for: the one the application gave it already (a 408
    // mid-body), else its span's, else a new one (traceresponse).
    const given = target instanceof ServerResponse ? undefined : currentResponse(target)?.getHeader(TRACE_RESPONSE);
    const answerId = typeof given === 'string' ? given : traceResponse();
    logger.debug({ status, detail, code, in_application: inApplication, trace_id: traceIdOf(answerId) }, REFUSAL_LOG_MESSAGE);
    const answer = problemAnswer(status, detail, { ...refusal.headers, Connection: 'close' }, answerId);
    if (target instanceof ServerResponse) {
      sendProblem(target, answer);
      return;
    }
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n`;
    for (const [name, value] of Object.entries(answer.headers)) head += `${name}: ${value}\r\n`;
    target.write(`${head}\r\n${answer.body}`);
    closeLingering(target, lingering);
  };

  // Past server.maxConnections Node closes each new connection as it arrives and emits 'drop':
  // every one is counted, and a line logged at most every 10 s, so that a flood cannot flood the log.
  let dropped = 0;
  let droppedLoggedAt = -Infinity;
  server.on('drop', () => {
    options.metrics?.countRefusedRequest('connection_limit');
    dropped += 1;
    if (performance.now() - droppedLoggedAt < 10_000) return;
    logger.warn({ max_connections: server.maxConnections, refused: dropped }, 'connection limit reached: closing new connections at once');
    droppedLoggedAt = performance.now();
    dropped = 0;
  });

  server.on('connection', (socket: Socket) => {
    const state: ConnectionState = { turn: -1, requestsInTurn: 0, closedWith: undefined, awaitingContinue: undefined };
    (socket as GuardedSocket)[STATE] = state;
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

  server.on('clientError', (error: ParserError, socket: Duplex) => {
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
    const state = stateOf(socket);
    if (state !== undefined) state.closedWith = status;
    refuse(socket, { status, detail: clientErrorDetail(status), code: error.code, inApplication: currentResponse(socket) !== undefined });
  });

  return {
    admit(req) {
      const state = stateOf(req.socket);
      if (state === undefined) return true;
      const now = currentTurn();
      if (state.turn !== now) {
        state.turn = now;
        state.requestsInTurn = 0;
      }
      state.requestsInTurn += 1;
      if (state.requestsInTurn <= MAX_REQUESTS_PER_CONNECTION_PER_TURN) return true;
      refuse(req.socket, {
        status: undefined,
        detail: `The connection pipelined more than ${MAX_REQUESTS_PER_CONNECTION_PER_TURN} requests in one turn of the event loop.`,
      });
      return false;
    },
    refuse,
    awaitContinue(res) {
      const state = stateOf(res.req.socket);
      if (state !== undefined) state.awaitingContinue = res;
    },
  };
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
  return stateOf(socket)?.closedWith ?? 499;
}

/** Sends 100 Continue if the client waits for it; called when the request body is about to be read. */
export function sendContinue(res: ServerResponse): void {
  const state = stateOf(res.req.socket);
  if (state?.awaitingContinue !== res) return;
  state.awaitingContinue = undefined;
  res.writeContinue();
}

/** The detail of each status Node's parser (or the server, for the same reason) refuses a request with. */
export function clientErrorDetail(status: number): string {
  if (status === 431) return 'The request headers are larger than the server accepts.';
  if (status === 408) return 'The request was not received in time.';
  if (status === 505) return 'This server speaks HTTP/1.0 and HTTP/1.1 only.';
  return 'The request is not valid HTTP/1.1.';
}

/** What Node adds to a parser error (documented with the 'clientError' event). */
type ParserError = NodeJS.ErrnoException & { bytesParsed?: number; rawPacket?: Buffer };

/**
 * Node's parser rejects broken HTTP before any handler runs: 400 for a malformed request, 431 for
 * headers over the size limit, 408 for a request that took too long, 505 for an HTTP version it
 * cannot parse. Node would answer with an empty body; the guard answers with the same statuses in
 * the problem+json shape every other error uses.
 */
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

/** The response Node is writing, or waiting to write, on this connection (Node's own bookkeeping). */
function currentResponse(socket: Duplex): ServerResponse | undefined {
  return (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
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
