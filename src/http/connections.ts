/**
 * Per connection of a node:http server, through its public events: the refusals (the one way a
 * request is turned away before the application) and the status of a request whose client left.
 */
import { ServerResponse, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger';
import type { Metrics, RefusalReason } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';
import { TRACE_RESPONSE, traceIdOf, traceResponse } from './trace-response';

/** The request's connection closed (the client left, or the server answered 408) before its answer: nothing is answered. */
export class ConnectionClosed extends Error {}

/** nginx's status for a request whose client left before its answer. */
const CLIENT_LEFT = 499;

const REFUSAL_BY_STATUS: Readonly<Record<number, RefusalReason>> = {
  400: 'bad_request',
  405: 'connect',
  408: 'request_timeout',
  417: 'expectation_failed',
  431: 'headers_too_large',
  505: 'http_version_not_supported',
};

export interface Refusal {
  readonly status: number;
  readonly detail: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly code?: string;
}

export const REFUSAL_LOG_MESSAGE = 'refused a request before the application';

/** Lines of refusals per window at most (with the peer's address): enough to see an attack, too few to fill a disk. */
export const REFUSAL_LOG_LIMIT = { lines: 100, windowMs: 10_000 } as const;

export interface ConnectionGuardOptions {
  logger: Logger;
  /** The API port's only: the refusal counter is read as API traffic. */
  metrics?: Metrics;
}

export function guardConnections(server: Server, options: ConnectionGuardOptions) {
  const { logger } = options;
  // The latest request's response on each connection: Node keeps the one it writes only in an internal property.
  const latest = new WeakMap<Duplex, ServerResponse>();
  const dropped = new WeakSet<Duplex>();

  // pino has no rate limit of its own: a flood of refusals is logged up to a bound per window, then counted on the next line.
  let window = { startedAt: -Infinity, lines: 0, suppressed: 0 };
  const logRefusal = (level: 'info' | 'warn', fields: Record<string, unknown>): void => {
    const now = performance.now();
    // Stryker disable next-line EqualityOperator: > for >= differs only at the window's exact end, a float no clock lands on by design
    if (now - window.startedAt >= REFUSAL_LOG_LIMIT.windowMs) window = { startedAt: now, lines: 0, suppressed: window.suppressed };
    if (window.lines >= REFUSAL_LOG_LIMIT.lines) {
      window.suppressed += 1;
      return;
    }
    window.lines += 1;
    logger[level]({ ...fields, ...(window.suppressed > 0 ? { not_logged_before: window.suppressed } : {}) }, REFUSAL_LOG_MESSAGE);
    window.suppressed = 0;
  };
  const closedUnanswered = (reason: RefusalReason, detail: string, peer: string | undefined, fields: Record<string, unknown> = {}): void => {
    options.metrics?.countRefusedRequest(reason);
    logRefusal('warn', { detail, peer, ...fields });
  };

  /**
   * Through the response when there is one (Node writes it in order behind earlier pipelined
   * answers, then closes), else on the socket. `inApplication`: the application has the request
   * (a 408 mid-body) and records it itself.
   */
  const refuse = (target: ServerResponse | Duplex, refusal: Refusal, inApplication = false): void => {
    const { status, detail, code } = refusal;
    // Stryker disable next-line StringLiteral: every status refused here has its reason
    if (!inApplication) options.metrics?.countRefusedRequest(REFUSAL_BY_STATUS[status] ?? 'bad_request');
    const res = target instanceof ServerResponse ? target : undefined;
    const socket = res?.req.socket ?? (target as Duplex);
    // The id the application already gave the request, else a new one.
    const given = res?.getHeader(TRACE_RESPONSE);
    const answerId = typeof given === 'string' ? given : traceResponse();
    const peer = (socket as Partial<Socket>).remoteAddress;
    logRefusal('info', { status, detail, code, in_application: inApplication || undefined, peer, trace_id: traceIdOf(answerId) });
    const answer = problemAnswer(status, detail, { ...refusal.headers, Connection: 'close' }, answerId);
    if (res !== undefined) {
      sendProblem(res, answer);
      return;
    }
    // Stryker disable next-line StringLiteral: every status refused here has a reason phrase
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n`;
    for (const [name, value] of Object.entries(answer.headers)) head += `${name}: ${value}\r\n`;
    // What the client sent after it is not read: closing with it unread sends a reset, which may cost the client this answer.
    socket.end(`${head}\r\n${answer.body}`, () => socket.destroy());
  };

  // Past maxConnections Node closes each new connection at once.
  server.on('drop', (data) =>
    // Stryker disable next-line OptionalChaining: a TCP server's 'drop' always has its data (an IPC server's has none)
    closedUnanswered('connection_limit', `MAX_CONNECTIONS (${server.maxConnections}) are open.`, data?.remoteAddress, {
      max_connections: server.maxConnections,
    }),
  );
  // Past maxRequestsPerSocket Node answers 503 to each request and reads on: the connection is closed once the last answer (and Node's first 503) is written.
  server.on('dropRequest', (_req, socket: Duplex) => {
    if (dropped.has(socket)) return;
    dropped.add(socket);
    closedUnanswered('pipelining_limit', `The connection sent more than ${server.maxRequestsPerSocket} requests.`, (socket as Partial<Socket>).remoteAddress);
    const last = latest.get(socket);
    if (last === undefined || last.writableFinished) socket.destroy();
    else last.once('finish', () => socket.destroy());
  });

  server.on('connection', (socket: Socket) => {
    // The server span ends on the response's 'close', before Koa hears of it: set so that it says 499 too.
    socket.on('close', () => {
      const res = latest.get(socket);
      if (res !== undefined && !res.headersSent) res.statusCode = CLIENT_LEFT;
    });
  });

  server.on('clientError', (error: ParserError, socket: Duplex) => {
    // Already answered and closing.
    if (socket.writableEnded && error.code !== 'ECONNRESET') return;
    // Node's own rule, besides: nothing is written to a peer that is gone or cut its request off.
    if (error.code === 'ECONNRESET' || error.code === 'HPE_INVALID_EOF_STATE' || !socket.writable) return void socket.destroy();
    const status = clientErrorStatus(error);
    const refusal = { status, detail: clientErrorDetail(status), code: error.code };
    const res = latest.get(socket);
    if (res === undefined || (res.req.complete && res.writableFinished)) return refuse(socket, refusal);
    // In the latest request's body, or its timeout: answered through its response, unless it has been answered (Node would answer again).
    if (!res.req.complete) return res.headersSent ? void socket.destroy() : refuse(res, refusal, true);
    // In a request after it: after the answers before it.
    res.once('finish', () => (canAnswerOn(socket) ? refuse(socket, refusal) : socket.destroy()));
  });

  return {
    /** False for a request on a connection already ended or gone. Behind an answer that closes it, Node itself serves nothing. */
    admit(res: ServerResponse): boolean {
      const { socket } = res.req;
      if (!canAnswerOn(socket)) return false;
      latest.set(socket, res);
      return true;
    },
    refuse,
  };
}

/** Node answers 100 Continue at once unless 'checkContinue' has a listener; the server's listener adds the request here. */
export const awaitingContinue = new WeakSet<ServerResponse>();

/** Called when the body is about to be read, so that a body refused anyway is never asked for. */
export function sendContinue(res: ServerResponse): void {
  if (awaitingContinue.delete(res)) res.writeContinue();
}

export function canAnswerOn(socket: Duplex): boolean {
  return !socket.destroyed && !socket.writableEnded;
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
  // Stryker disable next-line ConditionalExpression,LogicalOperator,BooleanLiteral: a parser error always carries both; the check is for the types
  if (raw === undefined || at === undefined) return false;
  // Stryker disable next-line ConditionalExpression,EqualityOperator: at 0, lastIndexOf finds nothing and the line starts at 0 too
  const lineStart = at > 0 ? raw.lastIndexOf(0x0a, at - 1) + 1 : 0;
  return /^\S+ \S+ HTTP\/\d\.\d\r\n/.test(raw.toString('latin1', lineStart, at + 2));
}
