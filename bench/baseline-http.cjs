'use strict';
// The floor of the benchmark: plain node:http serving the same two routes with the same
// behaviour as product-service, and nothing else. The request body is drained, not parsed,
// because the service does not use it either (but it does read it up to BODY_LIMIT).
const http = require('node:http');
const { randomInt } = require('node:crypto');

const port = Number(process.env.PORT ?? 8080);
const host = process.env.HOST ?? '0.0.0.0';

const server = http.createServer((req, res) => {
  if (req.url === '/product' && req.method === 'POST') {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify({ product_id: randomInt(1, 2147483647) });
      res.writeHead(201, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    });
    return;
  }
  if (req.url === '/health' && (req.method === 'GET' || req.method === 'HEAD')) {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': 2 });
    res.end(req.method === 'HEAD' ? undefined : 'ok');
    return;
  }
  req.resume();
  res.writeHead(404, { 'content-type': 'application/problem+json' });
  res.end('{"title":"Not Found","status":404}');
});

server.listen(port, host);
// Graceful stop so the harness sees a clean exit (and --cpu-prof can write its profile).
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
