import type { Server } from 'node:http';
import type { Logger } from '../observability/logger';
import { problemAnswer, sendProblem } from './problem';
import { createHttpServer, type ServerOptions } from './server';

/** The kubelet opens one connection per probe (startup, liveness, readiness): room for a few at once, a bound for anything else. */
export const PROBE_MAX_CONNECTIONS = 16;

/**
 * Liveness on a listener of its own (as kube-proxy's healthz or Envoy's admin port): clients that
 * hold every connection of the API or metrics port cannot fail it, while a stuck event loop does.
 */
export function createProbeServer(logger: Logger, options: ServerOptions = {}): Server {
  return createHttpServer(
    (req, res) => {
      if (String(req.url).split('?')[0] !== '/health') return sendProblem(res, problemAnswer(404));
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': 2 });
      // Node sends no body in the answer to a HEAD.
      res.end('ok');
    },
    { logger, maxConnections: PROBE_MAX_CONNECTIONS },
    options,
  );
}
