import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from './logger';
import type { Metrics } from './metrics';
import { problem, PROBLEM_CONTENT_TYPE } from './problem';

/**
 * The admin port: `/metrics` only, kept off the API port so that the API can be exposed through an
 * ingress without exposing the metrics. Plain node:http: two answers do not need a framework.
 */
export function createMetricsServer(metrics: Pick<Metrics, 'render'>, logger: Logger): Server {
  const server = createServer((req, res) => {
    serveMetrics(req, res, metrics).catch((error: unknown) => {
      logger.error({ err: error }, 'failed to render metrics');
      if (!res.headersSent) sendProblem(res, 500);
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  return server;
}

async function serveMetrics(req: IncomingMessage, res: ServerResponse, metrics: Pick<Metrics, 'render'>): Promise<void> {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  const path = (req.url ?? '/').split('?')[0];
  if (path !== '/metrics') return sendProblem(res, 404);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return sendProblem(res, 405);
  }
  const { contentType, body } = await metrics.render(req.headers.accept);
  res.writeHead(200, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
}

function sendProblem(res: ServerResponse, status: number): void {
  const body = JSON.stringify(problem(status));
  res.writeHead(status, { 'Content-Type': PROBLEM_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
