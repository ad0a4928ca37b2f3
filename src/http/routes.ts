import { randomInt } from 'node:crypto';
import { METHODS, type IncomingMessage } from 'node:http';
import Router from '@koa/router';
import { trace } from '@opentelemetry/api';
import type { Config, Faults } from '../config';
import type { Metrics } from '../observability/metrics';
import { faultInjector } from './faults';
import { requestTarget } from '../request-target';
import { drainRequestBody } from './request-body';

/** The slice of the service's config the routes use, and its metrics. */
export interface RouteDependencies {
  config: Pick<Config, 'bodyLimit'> & Faults;
  metrics: Metrics;
  /** Tests replace it to provoke failures. */
  issueProductId?: () => number;
}

const HEALTH = '/health';

/** Routes only probes call (the kubelet's): their requests get no span, and their log lines are at debug. */
export const PROBE_ROUTES: ReadonlySet<string> = new Set([HEALTH]);

/** The API's product id range, inclusive: the tests read it here; openapi.yaml's copy, the one users read, is checked against it. */
export const PRODUCT_ID_MIN = 1;
export const PRODUCT_ID_MAX = 2_147_483_646;

/** randomInt's upper bound is exclusive. */
// Stryker disable next-line ArithmeticOperator: without the + 1 only the top id (one draw in 2^31) is never drawn
export const randomProductId = (): number => randomInt(PRODUCT_ID_MIN, PRODUCT_ID_MAX + 1);

export function createRouter({ config, metrics, issueProductId = randomProductId }: RouteDependencies): Router {
  const injectFault = faultInjector(config);
  // Every method Node's parser accepts is "implemented", so a known path with another method
  // gets 405 with Allow (from allowedMethods), never 501.
  const router = new Router({ methods: [...METHODS] });

  router.post('/product', async (ctx) => {
    // An id is issued only for a request fully received on a connection that can still carry the answer.
    await drainRequestBody(ctx.req, ctx.res, config.bodyLimit);
    if (injectFault !== undefined) await injectFault(ctx.req, ctx.res);
    const productId = issueProductId();
    trace.getActiveSpan()?.setAttribute('product.id', productId);
    // Koa's ctx.state carries it to the request's log line (middleware.ts), where on call looks for what a caller got.
    ctx.state.productId = productId;
    metrics.countProductIdIssued();
    ctx.status = 201;
    ctx.set('Content-Type', 'application/json; charset=utf-8');
    ctx.body = `{"product_id":${productId}}`;
  });

  // @koa/router answers HEAD from the GET route; Koa types a string body text/plain (UTF-8) and sends none for HEAD.
  router.get(HEALTH, (ctx) => {
    ctx.body = 'ok';
  });

  return router;
}

const routes = new WeakMap<IncomingMessage, string | undefined>();

/**
 * The route template a request matches, as the router matches paths (case, trailing slash), before
 * Koa runs: one answer for the span hooks, the span's name, the histogram and the log line. A 405's too
 * (only the path matched); none for a 404.
 */
export function routeOfRequest(router: Router, req: IncomingMessage): string | undefined {
  // Stryker disable next-line ConditionalExpression: a cache (about 1 µs a match, up to four lookups a request): the same answer either way
  if (routes.has(req)) return routes.get(req);
  const target = requestTarget(req);
  // Stryker disable next-line StringLiteral,LogicalOperator: a server's request always has a method; and each path here has one route, so any method finds it
  const match = 'path' in target ? router.match(target.path, req.method ?? 'GET') : undefined;
  // The route the method matched, else (a 405) the path's.
  // Stryker disable next-line UnaryOperator: each path here has one route, so the first is the last
  const layer = match?.pathAndMethod.at(-1) ?? match?.path[0];
  const route = typeof layer?.path === 'string' ? layer.path : undefined;
  // Stryker disable next-line CallExpression: the cache (see above)
  routes.set(req, route);
  return route;
}
