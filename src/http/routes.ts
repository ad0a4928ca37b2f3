import { randomInt } from 'node:crypto';
import { METHODS } from 'node:http';
import Router from '@koa/router';
import { trace } from '@opentelemetry/api';
import { NO_FAULTS, type Faults } from '../config';
import { faultInjector } from './faults';
import { drainRequestBody } from './request-body';

export interface RouteDependencies {
  /** Largest request body accepted, in bytes. */
  bodyLimit: number;
  /** Called once per id issued (counts product_ids_issued_total). */
  onProductIdIssued: () => void;
  /** Draws a product id; [1, 2147483646] (the API's range) by default. Tests replace it to provoke failures. */
  issueProductId?: () => number;
  /** Faults injected into POST /product (FAULT_ERROR_RATIO, FAULT_DELAY); none by default. */
  faults?: Faults;
}

/** Uniform over [1, 2147483646] from the CSPRNG: randomInt's upper bound is exclusive. */
export const randomProductId = (): number => randomInt(1, 2147483647);

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
  router.get('/health', (ctx) => {
    ctx.set('Content-Type', 'text/plain; charset=utf-8');
    ctx.body = 'ok';
  });

  return router;
}
