import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { createApp, type AppDependencies } from '../../src/app';
import { createHttpServer, listen, type HttpServerOptions } from '../../src/http-server';
import { createLogger, type Logger } from '../../src/logger';
import { createMetrics, type Metrics } from '../../src/metrics';

export interface InProcessService {
  server: Server;
  baseUrl: string;
  port: number;
  metrics: Metrics;
  logger: Logger;
  /** JSON log lines written so far. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * The application built by its factory, served by the real HTTP server on a real socket
 * (127.0.0.1, a port the OS picks), with a logger whose lines the test can read.
 */
export async function startInProcess(overrides: Partial<AppDependencies> = {}, serverOptions: HttpServerOptions = {}): Promise<InProcessService> {
  const logs: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const logger = createLogger({ level: 'debug', service: { name: 'product-service', version: 'test' }, destination });
  const metrics = createMetrics({ service: { name: 'product-service', version: 'test', revision: 'test' }, processMetrics: false });
  const app = createApp({ bodyLimit: 1024 * 1024, logger, metrics, ...overrides });
  const handle = app.callback();
  const server = createHttpServer((req, res) => void handle(req, res), logger, serverOptions);
  await listen(server, 0, '127.0.0.1');
  const { port } = server.address() as AddressInfo;
  return {
    server,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    metrics,
    logger,
    logs,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
