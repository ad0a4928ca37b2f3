// A local OTLP/HTTP receiver for the benchmark: counts requests, bytes and items per signal, so
// that the harness sees whether every request was exported. An empty body is a valid answer (an
// empty Export*ServiceResponse encodes to zero bytes).
//
// Run standalone: node bench/otlp-sink.mjs [port]   -> prints {"port":N} on stdout.
// GET /stats returns the counters as JSON; POST /reset zeroes them.
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { messages } from './otlp-protobuf.mjs';

const SIGNALS = ['traces', 'metrics', 'logs'];

function emptyStats() {
  /** @type {Record<string, {requests: number, bytes: number, items: number}>} */
  const stats = {};
  for (const s of SIGNALS) stats[s] = { requests: 0, bytes: 0, items: 0 };
  return stats;
}

/**
 * All three OTLP requests share one shape:
 * Request{ repeated Resource* = 1 } -> Resource*{ repeated Scope* = 2 } -> Scope*{ repeated item = 2 }.
 */
function countItems(body) {
  let n = 0;
  for (const resource of messages(body, 1)) for (const scope of messages(resource, 2)) n += messages(scope, 2).length;
  return n;
}

/**
 * @param {number} port 0 picks a free port
 */
export async function startSink(port = 0) {
  let stats = emptyStats();
  const server = http.createServer((req, res) => {
    const signal = req.url?.match(/^\/v1\/(traces|metrics|logs)$/)?.[1];
    if (req.method === 'POST' && signal) {
      const chunks = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const entry = stats[signal];
        entry.requests += 1;
        entry.bytes += raw.length;
        try {
          const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
          entry.items += countItems(body);
        } catch (err) {
          // A body we cannot walk still counts as received; say so once per request.
          process.stderr.write(`otlp-sink: cannot count ${signal} items: ${err}\n`);
        }
        res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }).end();
      });
      return;
    }
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(stats));
      return;
    }
    if (req.method === 'POST' && req.url === '/reset') {
      stats = emptyStats();
      res.writeHead(204).end();
      return;
    }
    req.resume();
    res.writeHead(404).end();
  });
  // Exporters keep their connection alive between batches; do not cut it mid-run.
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(undefined)));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    stats: () => JSON.parse(JSON.stringify(stats)),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve(undefined));
      }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const sink = await startSink(Number(process.argv[2] ?? 0));
  process.stdout.write(JSON.stringify({ port: sink.port }) + '\n');
  process.on('SIGTERM', () => sink.close().then(() => process.exit(0)));
}
