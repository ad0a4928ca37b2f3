/**
 * Per connection of a node:http server: the pipelining bound, the status the server closed it
 * with, lingering close, and refusals (the one way a request is turned away before the application).
 */
import { ServerResponse, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import type { Metrics, RefusalReason } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';
import { TRACE_RESPONSE, traceIdOf, traceResponse } from './trace-response';

/**
 * As nginx's lingering_close: closing a socket with unread bytes sends a reset, which discards the
 * answer the client has not read yet (a 413 it would never see). nginx's timeout; bytes enough for
 * a client that writes its whole body before reading.
 */
const LINGERING_CLOSE = { maxMs: 5_000, maxBytes: 32 * 1024 * 1024 } as const;

/**
 * Requests one connection may pipeline within one turn of the event loop before it is closed:
 * Node hands over every request of a read at once, so one pipelining client would otherwise be
 * served while every other waits, and hold its unread answers in memory.
 */
export const MAX_REQUESTS_PER_CONNECTION_PER_TURN = 64;

/** The request's connection closed (the client left, or the server answered 408) before its answer: nothing is answered. */
export class ConnectionClosed extends Error {
  constructor() {
    super('The connection closed before the request could be answered.');
    this.name = 'ConnectionClosed';
  }
}

const REFUSAL_BY_STATUS: Readonly<Record<number, RefusalReason>> = {
  400: 'bad_request',
  405: 'connect',
  408: 'request_timeout',
  417: 'expectation_failed',
  431: 'headers_too_large',
  505: 'http_version_not_supported',
};

export type LingeringLimits = { [K in keyof typeof LINGERING_CLOSE]: number };

export interface Refusal {
  /** Undefined closes the connection without an answer. */
  readonly status: number | undefined;
  readonly detail: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly code?: string;
  /** The application has the request (a 408 mid-body) and records it itself. */
  readonly inApplication?: boolean;
}

export const REFUSAL_LOG_MESSAGE = 'refused a request before the application';

/** Lines of refusals per window at most (info, with the peer's address): enough to see an attack, too few to fill a disk. */
export const REFUSAL_LOG_LIMIT = { lines: 100, windowMs: 10_000 } as const;

export interface ConnectionGuardOptions {
  logger: Logger;
  /** The API port's only: the refusal counter is read as API traffic. */
  metrics?: Metrics;
  lingeringClose?: LingeringLimits;
}

interface ConnectionState {
  /** The latest request's response: once it has finished, a parser error in that request's body gets no second answer. */
  latest: ServerResponse | undefined;
  turn: number;
  requestsInTurn: number;
  /** Answered outside any request's answer (408, 400, 431). */
  closedWith: number | undefined;
  awaitingContinue: ServerResponse | undefined;
}

const STATE = Symbol('product-service connection state');
type GuardedSocket = Duplex & { [STATE]?: ConnectionState };

function stateOf(socket: Duplex): ConnectionState | undefined {
  return (socket as GuardedSocket)[STATE];
}

export function guardConnections(server: Server, options: ConnectionGuardOptions) {
  const { logger } = options;
  const lingering = options.lingeringClose ?? LINGERING_CLOSE;

  // Moves on in the check phase after a turn's I/O: requests sharing a turn came in the same reads.
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

  // pino has no rate limit of its own: a flood of refusals is logged up to a bound per window, then counted on the next line.
  let window = { startedAt: -Infinity, lines: 0, suppressed: 0 };
  const logRefusal = (level: 'info' | 'warn', fields: Record<string, unknown>): void => {
    const now = performance.now();
    if (now - window.startedAt >= REFUSAL_LOG_LIMIT.windowMs) window = { startedAt: now, lines: 0, suppressed: window.suppressed };
    if (window.lines >= REFUSAL_LOG_LIMIT.lines) {
      window.suppressed += 1;
      return;
    }
    window.lines += 1;
    logger[level]({ ...fields, ...(window.suppressed > 0 ? { not_logged_before: window.suppressed } : {}) }, REFUSAL_LOG_MESSAGE);
    window.suppressed = 0;
  };

  // Through the response when there is one, so Node keeps it in order behind earlier pipelined answers.
  const refuse = (target: ServerResponse | Duplex, refusal: Refusal): void => {
    const { status, detail, code, inApplication } = refusal;
    if (inApplication !== true) options.metrics?.countRefusedRequest(status === undefined ? 'pipelining_limit' : (REFUSAL_BY_STATUS[status] ?? 'bad_request'));
    const peer = ((target instanceof ServerResponse ? target.req.socket : target) as Partial<Socket>).remoteAddress;
    if (status === undefined) {
      logRefusal('warn', { detail, code, peer });
      (target instanceof ServerResponse ? target.req.socket : target).destroy();
      return;
    }
    // The id the application already gave the request (a 408 mid-body), else a new one.
    const given = target instanceof ServerResponse ? undefined : currentResponse(target)?.getHeader(TRACE_RESPONSE);
    const answerId = typeof given === 'string' ? given : traceResponse();
    logRefusal('info', { status, detail, code, in_application: inApplication, peer, trace_id: traceIdOf(answerId) });
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

  // Past maxConnections: every drop is counted, but logged at most every 10 s so a flood cannot flood the log.
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
    const state: ConnectionState = { latest: undefined, turn: -1, requestsInTurn: 0, closedWith: undefined, awaitingContinue: undefined };
    (socket as GuardedSocket)[STATE] = state;
    // Node closes after a Connection: close answer with destroySoon(), which would not linger.
    socket.destroySoon = () => closeLingering(socket, lingering);
    // The server span ends on the response's 'close', before Koa hears of it: set so that it says 499 (or 408) too.
    socket.on('close', () => {
      const response = currentResponse(socket);
      if (response !== undefined && !response.headersSent) response.statusCode = closedConnectionStatus(socket);
    });
  });

  server.on('clientError', (error: ParserError, socket: Duplex) => {
    // Already answered and closing: the lingering close ends it.
    if (socket.writableEnded && error.code !== 'ECONNRESET') return;
    // Besides a reset or a cut-off request, Node's own rule: write nothing if the peer is gone or a response has already begun on this socket.
    const unanswerable = error.code === 'ECONNRESET' || error.code === 'HPE_INVALID_EOF_STATE' || !socket.writable;
    // Nor after the answer to the request whose body broke has finished (Node would answer it again).
    const latest = stateOf(socket)?.latest;
    const answered = latest !== undefined && latest.writableFinished && !latest.req.complete;
    if (unanswerable || answered || currentResponse(socket)?.headersSent === true) {
      socket.destroy();
      return;
    }
    const status = clientErrorStatus(error);
    const state = stateOf(socket);
    if (state !== undefined) state.closedWith = status;
    refuse(socket, { status, detail: clientErrorDetail(status), code: error.code, inApplication: currentResponse(socket) !== undefined });
  });

  return {
    /** False, the connection closed, past the pipelining bound. */
    admit(res: ServerResponse): boolean {
      const state = stateOf(res.req.socket);
      if (state === undefined) return true;
      state.latest = res;
      const now = currentTurn();
      if (state.turn !== now) {
        state.turn = now;
        state.requestsInTurn = 0;
      }
      state.requestsInTurn += 1;
      if (state.requestsInTurn <= MAX_REQUESTS_PER_CONNECTION_PER_TURN) return true;
      refuse(res.req.socket, {
        status: undefined,
        detail: `The connection pipelined more than ${MAX_REQUESTS_PER_CONNECTION_PER_TURN} requests in one turn of the event loop.`,
      });
      return false;
    },
    refuse,
    awaitContinue(res: ServerResponse): void {
      const state = stateOf(res.req.socket);
      if (state !== undefined) state.awaitingContinue = res;
    },
  };
}

export function canAnswerOn(socket: Duplex): boolean {
  return !socket.destroyed && !socket.writableEnded;
}

/** What the server answered the connection with before closing it (408), or nginx's 499 when the client left. */
export function closedConnectionStatus(socket: Duplex): number {
  return stateOf(socket)?.closedWith ?? 499;
}

/** Called when the body is about to be read, so that a body refused anyway is never asked for. */
export function sendContinue(res: ServerResponse): void {
  const state = stateOf(res.req.socket);
  if (state?.awaitingContinue !== res) return;
  state.awaitingContinue = undefined;
  res.writeContinue();
}

export function clientErrorDetail(status: number): string {
  if (status === 431) return 'The request headers are larger than the server accepts.';
  if (status === 408) return 'The request was not received in time.';
  if (status === 505) return 'This server speaks HTTP/1.0 and HTTP/1.1 only.';
  return 'The request is not valid HTTP/1.1.';
}

type ParserError = NodeJS.ErrnoException & { bytesParsed?: number; rawPacket?: Buffer };

/** Node's own statuses for what its parser rejects, answered as problem+json instead of an empty body. */
function clientErrorStatus(error: ParserError): number {
  if (error.code === 'HPE_HEADER_OVERFLOW') return 431;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (error.code === 'HPE_INVALID_VERSION' && namesAnotherVersion(error)) return 505;
  return 400;
}

/** A well-formed line naming another version (HTTP/3.0), not broken syntax reported the same way. */
function namesAnotherVersion(error: ParserError): boolean {
  const { rawPacket: raw, bytesParsed: at } = error;
  if (raw === undefined || at === undefined) return false;
  const lineStart = at > 0 ? raw.lastIndexOf(0x0a, at - 1) + 1 : 0;
  return /^\S+ \S+ HTTP\/\d\.\d\r\n/.test(raw.toString('latin1', lineStart, at + 2));
}

function currentResponse(socket: Duplex): ServerResponse | undefined {
  return (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
}

function closeLingering(socket: Duplex, limits: LingeringLimits): void {
  if (!canAnswerOn(socket)) return;
  socket.end();
  // Node's parser reads through its 'data' listener: the rest is dropped unparsed.
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
