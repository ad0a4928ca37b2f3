/**
 * The Koa middleware in front of the routes, one concern each, in the order app.ts chains them.
 * All but securityHeaders do their part after `await next()`, once the inner ones have settled
 * the answer.
 */
import type { ServerResponse } from 'node:http';
import type { RouterContext } from '@koa/router';
import type { Context, Middleware } from 'koa';
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { getRPCMetadata } from '@opentelemetry/core';
import type { Logger } from '../observability/logger';
import { UNMATCHED_ROUTE, type Metrics } from '../observability/metrics';
import { canAnswerOn, closedConnectionStatus } from './connections';
import { HttpProblem, problemAnswer } from './problem';
import { ConnectionClosed } from './request-body';
import { PROBE_ROUTES } from './routes';
import { SECURITY_HEADERS } from './security-headers';
import { TRACE_RESPONSE, traceIdOf, traceResponse } from './trace-response';

/** Sets the headers every answer carries, errors included. */
export function securityHeaders(): Middleware {
  return function securityHeaders(ctx, next) {
    ctx.set(SECURITY_HEADERS);
    return next();
  };
}

/**
 * Gives the answer its id (trace-response.ts), then records the request once its answer is known:
 * the duration histogram (with the trace id of a sampled request as exemplar) and the request log
 * line with that id as trace_id. The duration starts when the API server received the request, or
 * when the trusted proxy in front did (metrics.ts, receivedAt), so it includes what ran before.
 */
export function recordRequests(logger: Logger, metrics: Pick<Metrics, 'observeRequest' | 'receivedAt'>): Middleware {
  return async function recordRequests(ctx, next) {
    const startedAt = metrics.receivedAt(ctx.req) ?? performance.now();
    const answerId = traceResponse();
    ctx.set(TRACE_RESPONSE, answerId);
    await next();
    const seconds = (performance.now() - startedAt) / 1000;
    const route = routeOf(ctx);
    const status = ctx.status;
    metrics.observeRequest(ctx.method, route, status, seconds, sampledTraceId());
    const line = { method: ctx.method, route, status, duration_ms: Math.round(seconds * 1e6) / 1e3, trace_id: traceIdOf(answerId) };
    if (PROBE_ROUTES.has(route)) logger.debug(line, 'request completed');
    else logger.info(line, 'request completed');
  };
}

/**
 * Gives the server span its route. instrumentation-http reads it from the RPC metadata when the
 * response ends, and names the span and sets http.route from it (the koa instrumentation makes
 * no spans of its own here, see telemetry.ts).
 */
export function routeOnServerSpan(): Middleware {
  return async function routeOnServerSpan(ctx, next) {
    await next();
    const rpc = getRPCMetadata(context.active());
    const route = routeOf(ctx);
    if (rpc !== undefined && route !== UNMATCHED_ROUTE) rpc.route = route;
  };
}

/**
 * Turns every failure, and every error status left without a body, into an RFC 9457 answer. A
 * request whose connection can no longer carry an answer gets none (see leaveUnanswered).
 */
export function answerProblems(logger: Logger): Middleware {
  return async function answerProblems(ctx, next) {
    try {
      await next();
      if (ctx.status >= 400 && ctx.body == null) writeProblem(ctx, ctx.status);
    } catch (error) {
      if (error instanceof ConnectionClosed) {
        leaveUnanswered(ctx);
      } else if (error instanceof HttpProblem) {
        writeProblem(ctx, error.status, error.detail, error.headers);
      } else {
        // Details stay in the log and the span; the client learns only that it was our fault, and its id.
        const trace_id = traceIdOf(ctx.response.get(TRACE_RESPONSE));
        logger.error({ err: error, method: ctx.method, route: routeOf(ctx), status: 500, trace_id }, 'unexpected error while serving a request');
        recordFailure(ctx.res, error);
        writeProblem(ctx, 500, 'The server failed to answer this request; it has been logged under its trace_id.');
      }
    }
    if (!canAnswerOn(ctx.req.socket)) leaveUnanswered(ctx);
  };
}

/**
 * Koa writes nothing, and the request is recorded (histogram, log line, server span) with 499 when
 * the client left, or with what the server already answered on the connection (408).
 */
function leaveUnanswered(ctx: Context): void {
  ctx.status = closedConnectionStatus(ctx.req.socket);
  ctx.respond = false;
}

/** Why each failed request failed (a 500's span status message), until its response is gone. */
const failures = new WeakMap<ServerResponse, string>();

/** The exception on the server span, as an exception event, and its message kept for the span's status (failureOf). */
function recordFailure(res: ServerResponse, error: unknown): void {
  const exception = error instanceof Error ? error : String(error);
  trace.getActiveSpan()?.recordException(exception);
  failures.set(res, typeof exception === 'string' ? exception : `${exception.name}: ${exception.message}`);
}

/**
 * The status message of the server span of a request that failed with an unexpected error.
 * instrumentation-http sets the span's status from the answer's code when the response ends,
 * without a message; telemetry.ts asks for the message then, through IncomingRequests.failure.
 */
export const failureOf = (res: ServerResponse): string | undefined => failures.get(res);

function writeProblem(ctx: Context, status: number, detail?: string, headers?: Readonly<Record<string, string>>): void {
  const answer = problemAnswer(status, detail, headers, ctx.response.get(TRACE_RESPONSE));
  ctx.status = status;
  ctx.set(answer.headers);
  // Koa sets Content-Length again from the body.
  ctx.body = answer.body;
}

/** The route template that matched (even when only the path did, as for a 405), or UNMATCHED_ROUTE. */
function routeOf(ctx: Context): string {
  const routed = ctx as Context & Partial<Pick<RouterContext, '_matchedRoute' | 'matched'>>;
  return routed._matchedRoute?.toString() ?? routed.matched?.[0]?.path.toString() ?? UNMATCHED_ROUTE;
}

/** The trace id of the active span when it is recorded and sampled, i.e. when its trace will exist. */
function sampledTraceId(): string | undefined {
  const span = trace.getSpan(context.active());
  if (span?.isRecording() !== true) return undefined;
  const { traceId, traceFlags } = span.spanContext();
  return (traceFlags & TraceFlags.SAMPLED) !== 0 ? traceId : undefined;
}
