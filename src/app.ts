import type { RouterContext } from '@koa/router';
import Koa, { type Context, type Next } from 'koa';
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { getRPCMetadata } from '@opentelemetry/core';
import { canAnswerOn, closedConnectionStatus } from './http-server';
import type { Logger } from './logger';
import { UNMATCHED_ROUTE, type Metrics } from './metrics';
import { HttpProblem, problem, PROBLEM_CONTENT_TYPE } from './problem';
import { ConnectionClosed } from './request-body';
import { createRouter, type RouteDependencies } from './routes';

export interface AppDependencies {
  bodyLimit: number;
  logger: Logger;
  metrics: Pick<Metrics, 'countProductIdIssued' | 'observeRequest'>;
  issueProductId?: RouteDependencies['issueProductId'];
}

/** Paths probed by the kubelet or scraped by Prometheus: their request lines are logged at debug. */
const PROBE_ROUTES = new Set(['/health']);

/** The Koa application: observation and error answers, then the two routes. No globals. */
export function createApp(deps: AppDependencies): Koa {
  const app = new Koa();
  const router = createRouter({
    bodyLimit: deps.bodyLimit,
    onProductIdIssued: () => deps.metrics.countProductIdIssued(),
    issueProductId: deps.issueProductId,
  });

  app.use(observeRequests(deps));
  app.use(router.routes());
  app.use(router.allowedMethods());

  // Errors Koa meets outside the middleware (e.g. a socket failing mid-response): log, keep serving.
  // A client that resets its connection is no fault of the server's (its request counts as 499).
  app.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'ECONNRESET' || error.code === 'EPIPE') deps.logger.debug({ err: error }, 'client connection failed');
    else deps.logger.error({ err: error }, 'error outside a request handler');
  });
  return app;
}

/**
 * The one middleware around the routes (one layer, not two: each Koa layer costs a closure and a
 * promise per request). It sets the headers every answer carries, turns failures into problem
 * answers, then records the duration histogram (with the trace id as exemplar), the request log
 * line (inside the request's context, so it carries trace_id) and the route of the server span.
 */
function observeRequests(deps: AppDependencies) {
  return async function observe(ctx: Context, next: Next): Promise<void> {
    const startedAt = performance.now();
    ctx.res.setHeader('X-Content-Type-Options', 'nosniff');
    await answerProblems(ctx, next, deps.logger);
    if (!canAnswerOn(ctx.req.socket)) leaveUnanswered(ctx);
    recordRequest(ctx, deps, startedAt);
  };
}

/** Once the answer is known: names the server span's route, observes the histogram, writes the request log line. */
function recordRequest(ctx: Context, deps: AppDependencies, startedAt: number): void {
  const seconds = (performance.now() - startedAt) / 1000;
  const route = routeOf(ctx);
  const status = ctx.status;
  const active = context.active();
  // instrumentation-http reads the route from here when the response ends: it becomes http.route and names the span.
  const rpc = getRPCMetadata(active);
  if (rpc !== undefined && route !== UNMATCHED_ROUTE) rpc.route = route;
  const span = trace.getSpan(active);
  const spanContext = span?.isRecording() === true ? span.spanContext() : undefined;
  const exemplarTraceId = spanContext !== undefined && isSpanContextSampled(spanContext.traceFlags) ? spanContext.traceId : undefined;
  deps.metrics.observeRequest(ctx.method, route, status, seconds, exemplarTraceId);
  const line = { method: ctx.method, route, status, duration_ms: Math.round(seconds * 1e6) / 1e3 };
  if (PROBE_ROUTES.has(route)) deps.logger.debug(line, 'request completed');
  else deps.logger.info(line, 'request completed');
}

function isSpanContextSampled(traceFlags: number): boolean {
  return (traceFlags & TraceFlags.SAMPLED) !== 0;
}

/** The route template that matched (even when only the path did, as for a 405), or UNMATCHED_ROUTE. */
function routeOf(ctx: Context): string {
  const routed = ctx as Context & Partial<Pick<RouterContext, '_matchedRoute' | 'matched'>>;
  return routed._matchedRoute?.toString() ?? routed.matched?.[0]?.path.toString() ?? UNMATCHED_ROUTE;
}

/** Turns every failure, and every error status left without a body, into an RFC 9457 answer. */
async function answerProblems(ctx: Context, next: Next, logger: Logger): Promise<void> {
  try {
    await next();
    if (ctx.status >= 400 && ctx.body == null) writeProblem(ctx, ctx.status);
  } catch (error) {
    if (error instanceof ConnectionClosed) {
      leaveUnanswered(ctx);
    } else if (error instanceof HttpProblem) {
      writeProblem(ctx, error.status, error.detail);
      ctx.set(error.headers);
    } else {
      // Details stay in the log; the client learns only that it was our fault.
      logger.error({ err: error }, 'unexpected error while serving a request');
      writeProblem(ctx, 500, 'The server failed to answer this request; it has been logged.');
    }
  }
}

/**
 * A request whose connection can no longer carry an answer: Koa writes nothing, and it is recorded
 * (histogram, log line, server span) with 499 when the client left, or with what the server
 * already answered on the connection (408).
 */
function leaveUnanswered(ctx: Context): void {
  ctx.status = closedConnectionStatus(ctx.req.socket);
  ctx.respond = false;
}

function writeProblem(ctx: Context, status: number, detail?: string): void {
  ctx.status = status;
  ctx.set('Content-Type', PROBLEM_CONTENT_TYPE);
  ctx.body = JSON.stringify(problem(status, detail));
}
