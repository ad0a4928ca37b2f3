import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';
import { setSecurityHeaders } from './security-headers';
import { createHttpServer, METRICS_MAX_CONNECTIONS, type ServerOptions } from './server';

/**
 * The metrics port: `/metrics` only, kept off the API port so that the API can be exposed through
 * an ingress without exposing the metrics. The same server as the API port's (server.ts: timeouts,
 * pipelining bound, refusals, lingering close), since whatever reaches this port can send what a
 * client of the API can. Its refusals are logged, not counted: the refusal counter is the API's
 * (its dashboard panel and alerts read it as API traffic). Plain node:http behind it: two answers
 * do not need a framework.
 */
export function createMetricsServer(metrics: Pick<Metrics, 'render'>, logger: Logger, options: ServerOptions = {}): Server {
  const scrape = (req: IncomingMessage, res: ServerResponse): void => {
    serveMetrics(req, res, metrics).catch((error: unknown) => {
      logger.error({ err: error }, 'failed to render metrics');
      if (!res.headersSent) sendProblem(res, problemAnswer(500));
      else res.destroy();
    });
  };
  return createHttpServer(scrape, { logger, maxConnections: METRICS_MAX_CONNECTIONS }, options);
}

async function serveMetrics(req: IncomingMessage, res: ServerResponse, metrics: Pick<Metrics, 'render'>): Promise<void> {
  setSecurityHeaders(res);
  const path = (req.url ?? '/').split('?')[0];
  if (path !== '/metrics') return sendProblem(res, problemAnswer(404));
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendProblem(res, problemAnswer(405, undefined, { Allow: 'GET, HEAD' }));
  const { contentType, body } = await metrics.render(req.headers.accept);
  // The client may have gone, or the connection been refused, while the exposition was rendered.
  if (res.destroyed) return;
  res.writeHead(200, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
}
