import { randomInt } from 'node:crypto';
import { METHODS, type IncomingMessage } from 'node:http';
import Router from '@koa/router';
import { trace } from '@opentelemetry/api';
import { NO_FAULTS, type Faults } from '../config';
import { faultInjector } from './faults';
import { requestTarget } from './request-target';
import { drainRequestBody } from './request-body';

export interface RouteDependencies {
  /** Largest request body accepted, in bytes. */
  bodyLimit: number;
  /** Called once per id issued (counts product_ids_issued_total). */
  onProductIdIssued: () => void;
  /** Draws a product id; randomProductId by default. Tests replace it to provoke failures. */
  issueProductId?: () => number;
  /** Faults injected into POST /product (FAULT_ERROR_RATIO, FAULT_DELAY); none by default. */
  faults?: Faults;
}

const HEALTH = '/health';

/** Routes only probes call (the kubelet's): their requests get no span, and their log lines are at debug. */
export const PROBE_ROUTES: ReadonlySet<string> = new Set([HEALTH]);

/** The API's product id range, inclusive: openapi.yaml, the docs, the tests and the benchmark are checked against it. */
export const PRODUCT_ID_MIN = 1;
export const PRODUCT_ID_MAX = 2_147_483_646;

/** Uniform over [PRODUCT_ID_MIN, PRODUCT_ID_MAX] from the CSPRNG: randomInt's upper bound is exclusive. */
export const randomProductId = (): number => randomInt(PRODUCT_ID_MIN, PRODUCT_ID_MAX + 1);

export function createRouter(deps: RouteDependencies): Router {
  const issueProductId = deps.issueProductId ?? randomProductId;
  const injectFault = faultInjector(deps.faults ?? NO_FAULTS);
  // Every method Node's parser accepts is "implemented", so a known path with another method
  // gets 405 with Allow (from allowedMethods), never 501.
  const router = new Router({ methods: [...METHODS] });

  router.post('/product', async (ctx) => {
    // The API never interprets the body; it is read to its end (and the size limit enforced)
    // before the id is issued, so an id is only counted for a request that was fully received
    // on a connection that can still carry the answer.
    await drainRequestBody(ctx.req, ctx.res, deps.bodyLimit);
    if (injectFault !== undefined) await injectFault(ctx.req, ctx.res);
    const productId = issueProductId();
    trace.getActiveSpan()?.setAttribute('product.id', productId);
    deps.onProductIdIssued();
    ctx.status = 201;
    ctx.set('Content-Type', 'application/json; charset=utf-8');
    ctx.body = `{"product_id":${productId}}`;
  });

  // @koa/router answers HEAD from the GET route; Koa sends no body for HEAD.
  router.get(HEALTH, (ctx) => {
    ctx.set('Content-Type', 'text/plain; charset=utf-8');
    ctx.body = 'ok';
  });

  return router;
}

/**
 * Whether `req` is for one of the PROBE_ROUTES, whatever its method, as `router` matches paths
 * (the same case-insensitivity and trailing slash); asked before Koa runs, to leave probes untraced.
 */
export function isProbeRequest(router: Router, req: IncomingMessage): boolean {
  return routesOfPath(router, req).some((layer) => typeof layer.path === 'string' && PROBE_ROUTES.has(layer.path));
}

/** Whether `req`'s path is one of the routes, whatever its method (a 405 is routed, a 404 is not); asked before Koa runs. */
export function isRoutedRequest(router: Router, req: IncomingMessage): boolean {
  return routesOfPath(router, req).length > 0;
}

/** The routes whose path `req`'s path matches, as the router matches it: the path requestTarget gives Koa too; none for a target not served. */
function routesOfPath(router: Router, req: IncomingMessage): ReturnType<Router['match']>['path'] {
  const target = requestTarget(req);
  return 'path' in target ? router.match(target.path, req.method ?? 'GET').path : [];
}
