import type { RouterContext } from '@koa/router';
import Koa, { type Context, type Next } from 'koa';
import { context as otelContext, trace } from '@opentelemetry/api';
import { getRPCMetadata, RPCType } from '@opentelemetry/core';
import type { Logger } from './logger';
import { UNMATCHED_ROUTE, type Metrics } from './metrics';
import { HttpProblem, problem, PROBLEM_CONTENT_TYPE } from './problem';
import { createRouter, type RouteDependencies } from './routes';

export interface AppDependencies {
  bodyLimit: number;
  logger: Logger;
  metrics: Pick<Metrics, 'countProductIdIssued' | 'observeRequest'>;
  issueProductId?: RouteDependencies['issueProductId'];
}

/** Paths probed by the kubelet or scraped by Prometheus: their request lines are logged at debug. */
const PROBE_ROUTES = new Set(['/health']);

/** The Koa application: observation, then error answers, then the two routes. No globals. */
export function createApp(deps: AppDependencies): Koa {
  const app = new Koa();
  const router = createRouter({
    bodyLimit: deps.bodyLimit,
    onProductIdIssued: () => deps.metrics.countProductIdIssued(),
    issueProductId: deps.issueProductId,
  });

  app.use(observeRequests(deps));
  app.use(answerProblems(deps.logger));
  app.use(router.routes());
  app.use(router.allowedMethods());

  // Errors Koa meets outside the middleware (e.g. a socket failing mid-response): log, keep serving.
  app.on('error', (error: unknown) => deps.logger.error({ err: error }, 'error outside a request handler'));
  return app;
}

/**
 * Outermost middleware: sets the headers every answer carries, then, once the answer is known,
 * records the duration histogram, the request log line and the route of the trace's server span.
 */
function observeRequests(deps: AppDependencies) {
  return async function observe(ctx: Context, next: Next): Promise<void> {
    const startedAt = performance.now();
    ctx.set('X-Content-Type-Options', 'nosniff');
    await next();
    const seconds = (performance.now() - startedAt) / 1000;
    const route = routeOf(ctx);

    // The route names the server span ("POST /product") and sets its http.route, through the
    // RPC metadata that @opentelemetry/instrumentation-http reads when the span ends.
    const rpcMetadata = getRPCMetadata(otelContext.active());
    if (rpcMetadata?.type === RPCType.HTTP && route !== UNMATCHED_ROUTE) rpcMetadata.route = route;

    const spanContext = trace.getActiveSpan()?.spanContext();
    const sampled = spanContext !== undefined && (spanContext.traceFlags & 1) === 1;
    deps.metrics.observeRequest(ctx.method, route, ctx.status, seconds, sampled ? spanContext.traceId : undefined);

    const line = { method: ctx.method, route, status: ctx.status, duration_ms: Math.round(seconds * 1e6) / 1e3 };
    if (PROBE_ROUTES.has(route)) deps.logger.debug(line, 'request completed');
    else deps.logger.info(line, 'request completed');
  };
}

/** The route template that matched (even when only the path did, as for a 405), or UNMATCHED_ROUTE. */
function routeOf(ctx: Context): string {
  const routed = ctx as Context & Partial<Pick<RouterContext, '_matchedRoute' | 'matched'>>;
  return routed._matchedRoute?.toString() ?? routed.matched?.[0]?.path.toString() ?? UNMATCHED_ROUTE;
}

/** Turns every failure, and every error status left without a body, into an RFC 9457 answer. */
function answerProblems(logger: Logger) {
  return async function problems(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
      if (ctx.status >= 400 && ctx.body == null) writeProblem(ctx, ctx.status);
    } catch (error) {
      if (error instanceof HttpProblem) {
        writeProblem(ctx, error.status, error.detail);
        ctx.set(error.headers);
      } else {
        // Details stay in the log; the client learns only that it was our fault.
        logger.error({ err: error }, 'unexpected error while serving a request');
        writeProblem(ctx, 500, 'The server failed to answer this request; it has been logged.');
      }
    }
  };
}

function writeProblem(ctx: Context, status: number, detail?: string): void {
  ctx.status = status;
  ctx.set('Content-Type', PROBLEM_CONTENT_TYPE);
  ctx.body = JSON.stringify(problem(status, detail));
}
