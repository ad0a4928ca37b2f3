/** The Koa middleware in front of the routes; each does its part once the inner ones have settled the answer. */
import type { ServerResponse } from 'node:http';
import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { context, trace } from '@opentelemetry/api';
import { getRPCMetadata } from '@opentelemetry/core';
import type { Logger } from '../observability/logger';
import { UNMATCHED_ROUTE, type Metrics } from '../observability/metrics';
import { ConnectionClosed } from './connections';
import { HttpProblem, problemAnswer } from './problem';
import { PROBE_ROUTES, routeOfRequest } from './routes';
import { TRACE_RESPONSE, traceIdOf, traceResponse } from './trace-response';

/** Gives the answer its id, then records the request: the histogram (a sampled trace as exemplar) and the log line. */
export function recordRequests(logger: Logger, metrics: Metrics, router: Router): Middleware {
  return async function recordRequests(ctx, next) {
    const startedAt = metrics.receivedAt(ctx.req) ?? performance.now();
    const answerId = traceResponse();
    ctx.set(TRACE_RESPONSE, answerId);
    await next();
    const seconds = (performance.now() - startedAt) / 1000;
    const route = routeOfRequest(router, ctx.req) ?? UNMATCHED_ROUTE;
    const status = ctx.status;
    metrics.observeRequest(ctx.method, route, status, seconds, sampledTraceId());
    const product_id = (ctx.state as { productId?: number }).productId;
    const line = { method: ctx.method, route, status, duration_ms: Math.round(seconds * 1e6) / 1e3, trace_id: traceIdOf(answerId), product_id };
    if (PROBE_ROUTES.has(route)) logger.debug(line, 'request completed');
    else logger.info(line, 'request completed');
  };
}

/**
 * instrumentation-http names the server span from the RPC metadata's route in its listener on the
 * response's 'close', which for a client that left (499) fires before Koa's middleware resumes:
 * the router's match is put there by a listener run just before it. Not at the request's start:
 * written then, it sent the young generation into the promote-everything mode (docs/performance.md).
 */
export function routeOnServerSpan(router: Router): Middleware {
  return function routeOnServerSpan(ctx, next) {
    const rpc = getRPCMetadata(context.active());
    // Without the SDK's server span there is none. An undefined route (a 404) names no span.
    if (rpc !== undefined) {
      const route = routeOfRequest(router, ctx.req);
      ctx.res.prependOnceListener('close', () => {
        rpc.route = route;
      });
    }
    return next();
  };
}

/** Every failure, and every answer left without a body (an error status), becomes an RFC 9457 answer. */
export function answerProblems(logger: Logger, router: Router): Middleware {
  return async function answerProblems(ctx, next) {
    try {
      await next();
      // Koa's 404 and the router's 405 are the answers left without a body.
      if (ctx.body == null) writeProblem(ctx, ctx.status);
    } catch (error) {
      if (error instanceof ConnectionClosed) {
        // Nothing to answer: Koa writes nothing to a gone connection (ctx.writable), which connections.ts records as 499.
      } else if (error instanceof HttpProblem) {
        writeProblem(ctx, error.status, error.detail, error.headers);
      } else {
        // Details stay in the log and the span; the client learns only that it was our fault, and its id.
        const trace_id = traceIdOf(ctx.response.get(TRACE_RESPONSE));
        logger.error(
          { err: error, method: ctx.method, route: routeOfRequest(router, ctx.req) ?? UNMATCHED_ROUTE, status: 500, trace_id },
          'unexpected error while serving a request',
        );
        recordFailure(ctx.res, error);
        writeProblem(ctx, 500, 'The server failed to answer this request; it has been logged under its trace_id.');
      }
    }
  };
}

const failures = new WeakMap<ServerResponse, string>();

function recordFailure(res: ServerResponse, error: unknown): void {
  const exception = error instanceof Error ? error : String(error);
  trace.getActiveSpan()?.recordException(exception);
  // An Error's string is "name: message".
  failures.set(res, String(exception));
}

/** instrumentation-http sets a span's status from the code, without a message; telemetry.ts asks for it here. */
export const failureOf = (res: ServerResponse): string | undefined => failures.get(res);

function writeProblem(ctx: Context, status: number, detail?: string, headers?: Readonly<Record<string, string>>): void {
  const answer = problemAnswer(status, detail, headers, ctx.response.get(TRACE_RESPONSE));
  ctx.status = status;
  ctx.set(answer.headers);
  ctx.body = answer.body;
}

/** The samplers OTEL_TRACES_SAMPLER names record exactly the spans they sample. */
function sampledTraceId(): string | undefined {
  const span = trace.getSpan(context.active());
  return span?.isRecording() === true ? span.spanContext().traceId : undefined;
}
