import type Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { answerProblems, recordRequests, routeOnServerSpan } from './middleware';

/** The Koa application: a request passes the middleware in this order, then the router. No globals. */
export function createApp(deps: { router: Router; logger: Logger; metrics: Metrics }): Koa {
  const app = new Koa();
  app.use(recordRequests(deps.logger, deps.metrics, deps.router));
  app.use(routeOnServerSpan(deps.router));
  app.use(answerProblems(deps.logger, deps.router));
  app.use(deps.router.routes());
  app.use(deps.router.allowedMethods());

  // A client that resets its connection is no fault of the server's.
  app.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'ECONNRESET' || error.code === 'EPIPE') deps.logger.debug({ err: error }, 'client connection failed');
    else deps.logger.error({ err: error }, 'error outside a request handler');
  });
  return app;
}
