import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { problemAnswer, sendProblem } from './problem';
import { createHttpServer, METRICS_MAX_CONNECTIONS, type ServerOptions } from './server';

/**
 * Off the API port, so the API can be exposed through an ingress without the metrics; the same
 * hardened server, since anything can reach it; plain node:http: two answers need no framework.
 */
export function createMetricsServer(metrics: Metrics, logger: Logger, options: ServerOptions = {}): Server {
  const scrape = (req: IncomingMessage, res: ServerResponse): void => {
    serveMetrics(req, res, metrics).catch((error: unknown) => {
      // The render settles before anything is written: the answer is still to give.
      logger.error({ err: error }, 'failed to render metrics');
      sendProblem(res, problemAnswer(500));
    });
  };
  return createHttpServer(scrape, { logger, maxConnections: METRICS_MAX_CONNECTIONS }, options);
}

async function serveMetrics(req: IncomingMessage, res: ServerResponse, metrics: Metrics): Promise<void> {
  if (String(req.url).split('?')[0] !== '/metrics') return sendProblem(res, problemAnswer(404));
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendProblem(res, problemAnswer(405, undefined, { Allow: 'GET, HEAD' }));
  const { contentType, body } = await metrics.render(req.headers.accept);
  if (res.destroyed) return;
  res.writeHead(200, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  // Node sends no body in the answer to a HEAD.
  res.end(body);
}
