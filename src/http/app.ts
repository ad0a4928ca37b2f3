import Koa from 'koa';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { answerProblems, recordRequests, routeOnServerSpan, securityHeaders } from './middleware';
import { createRouter, type RouteDependencies } from './routes';

export interface AppDependencies {
  bodyLimit: number;
  logger: Logger;
  metrics: Pick<Metrics, 'countProductIdIssued' | 'observeRequest' | 'receivedAt'>;
  issueProductId?: RouteDependencies['issueProductId'];
  faults?: RouteDependencies['faults'];
}

/** The Koa application: a request passes the middleware in this order, then the two routes. No globals. */
export function createApp(deps: AppDependencies): Koa {
  const app = new Koa();
  const router = createRouter({
    bodyLimit: deps.bodyLimit,
    onProductIdIssued: () => deps.metrics.countProductIdIssued(),
    issueProductId: deps.issueProductId,
    faults: deps.faults,
  });

  app.use(securityHeaders());
  app.use(recordRequests(deps.logger, deps.metrics));
  app.use(routeOnServerSpan());
  app.use(answerProblems(deps.logger));
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
