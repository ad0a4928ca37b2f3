import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { SERVER_TIMEOUTS } from './api-server';
import { problemAnswer, sendProblem } from './problem';
import { setSecurityHeaders } from './security-headers';

/**
 * The metrics port: `/metrics` only, kept off the API port so that the API can be exposed through
 * an ingress without exposing the metrics. Plain node:http: two answers do not need a framework.
 * The API's timeouts apply: Prometheus keeps its connection between scrapes, like a balancer.
 */
export function createMetricsServer(metrics: Pick<Metrics, 'render'>, logger: Logger): Server {
  return createServer(SERVER_TIMEOUTS, (req, res) => {
    serveMetrics(req, res, metrics).catch((error: unknown) => {
      logger.error({ err: error }, 'failed to render metrics');
      if (!res.headersSent) sendProblem(res, problemAnswer(500));
      else res.destroy();
    });
  });
}

async function serveMetrics(req: IncomingMessage, res: ServerResponse, metrics: Pick<Metrics, 'render'>): Promise<void> {
  setSecurityHeaders(res);
  const path = (req.url ?? '/').split('?')[0];
  if (path !== '/metrics') return sendProblem(res, problemAnswer(404));
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendProblem(res, problemAnswer(405, undefined, { Allow: 'GET, HEAD' }));
  const { contentType, body } = await metrics.render(req.headers.accept);
  res.writeHead(200, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
}
