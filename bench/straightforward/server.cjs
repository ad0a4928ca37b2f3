'use strict';
// The comparison service, written the way a typical Koa tutorial would: Koa + @koa/router,
// a pino request log line per request, a prom-client latency histogram and an id counter
// served on /metrics, and the same two routes as product-service. Not tuned on purpose.
const Koa = require('koa');
const { Router } = require('@koa/router');
const pino = require('pino');
const client = require('prom-client');
const crypto = require('node:crypto');

const logger = pino({ level: process.env.LOG_LEVEL || 'info' });

client.collectDefaultMetrics();
const httpRequestDuration = new client.Histogram({
  name: 'http_request_duration_seconds',
  help: 'Duration of HTTP requests in seconds',
  labelNames: ['method', 'route', 'status_code'],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
});
const productIdsIssued = new client.Counter({
  name: 'product_ids_issued_total',
  help: 'Product ids issued',
});

const app = new Koa();
const router = new Router();

app.use(async (ctx, next) => {
  const start = process.hrtime.bigint();
  try {
    await next();
  } finally {
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    const route = ctx._matchedRoute || 'unmatched';
    httpRequestDuration.labels(ctx.method, route, String(ctx.status)).observe(seconds);
    logger.info({ method: ctx.method, url: ctx.url, status: ctx.status, duration_ms: seconds * 1000 }, 'request completed');
  }
});

// Read the JSON body (the service accepts any body and does not use it).
async function readBody(ctx) {
  const chunks = [];
  for await (const chunk of ctx.req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : {};
}

router.post('/product', async (ctx) => {
  await readBody(ctx);
  const productId = crypto.randomInt(1, 2147483647);
  productIdsIssued.inc();
  ctx.status = 201;
  ctx.body = { product_id: productId };
});

router.get('/health', (ctx) => {
  ctx.body = 'ok';
});

router.get('/metrics', async (ctx) => {
  ctx.set('Content-Type', client.register.contentType);
  ctx.body = await client.register.metrics();
});

app.use(router.routes());
app.use(router.allowedMethods());

const port = Number(process.env.PORT || 8080);
app.listen(port, process.env.HOST || '0.0.0.0', () => {
  logger.info({ port }, 'server listening');
});
