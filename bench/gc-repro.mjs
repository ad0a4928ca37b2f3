// The young-generation cost of a traced request, without the service: a reduction of what the
// traced service allocates (a request's short-lived objects, and a span that waits in a queue for
// its batch before it is encoded and dropped), to compare scavenges between Node versions and
// flags (docs/performance.md, "Node 24 and Node 26"). No dependency, no I/O, no timers: the
// batch size alone sets how long a span lives. Prints one JSON line.
//
//   taskset -c 0 node --max-semi-space-size=16 [--single-threaded-gc] bench/gc-repro.mjs [--requests 1000000] [--batch 128]
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { requests: { type: 'string', default: '1000000' }, batch: { type: 'string', default: '128' } } });
const requests = Number(args.requests);
const batchSize = Number(args.batch);

// What start-up leaves in the old generation (modules, caches): old-to-young pointers from it
// are what a scavenge must visit as roots.
const longLived = Array.from({ length: 200_000 }, (_, i) => ({ id: i, name: `module-${i}`, refs: [] }));

let queue = [];
let exportedBytes = 0;
let sink = 0;
function request(i) {
  // The request's own garbage: parsed headers, a URL, a body, a log line.
  const headers = { host: '127.0.0.1:8080', 'content-type': 'application/json', 'content-length': '26', 'user-agent': `bench/${i % 7}` };
  const url = new URL(`http://127.0.0.1:8080/product?i=${i}`);
  const body = JSON.parse('{"name":"bench","price":1}');
  const log = JSON.stringify({ level: 30, time: Date.now(), msg: 'request completed', url: url.pathname, status: 201, body });
  sink += log.length + Object.keys(headers).length;
  // The span: ids, a dozen attributes, times; it lives until its batch is exported.
  const span = {
    traceId: (i * 2654435761).toString(16).padStart(32, '0'),
    spanId: (i * 40503).toString(16).padStart(16, '0'),
    name: 'POST /product',
    startTime: [Math.floor(i / 1000), (i % 1000) * 1e6],
    endTime: [Math.floor(i / 1000), (i % 1000) * 1e6 + 300_000],
    attributes: {
      'http.request.method': 'POST',
      'url.path': url.pathname,
      'url.scheme': 'http',
      'server.address': '127.0.0.1',
      'server.port': 8080,
      'network.peer.address': '127.0.0.1',
      'network.peer.port': 40000 + (i % 64),
      'user_agent.original': headers['user-agent'],
      'http.route': '/product',
      'http.response.status_code': 201,
      'network.protocol.version': '1.1',
      'product.id': i,
    },
    events: [],
    links: [],
    status: { code: 0 },
  };
  queue.push(span);
  if (queue.length >= batchSize) {
    // Encoding stands in for the OTLP exporter: a buffer made from the batch, then dropped.
    exportedBytes += Buffer.from(JSON.stringify(queue)).length;
    queue = [];
  }
}

// Warmed up (JIT, the long-lived objects promoted) before the collections are counted.
for (let i = 0; i < 50_000; i++) request(-i - 1);
await new Promise((resolve) => setTimeout(resolve, 10));
const minor = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) minor.push(e.duration);
}).observe({ entryTypes: ['gc'] });

const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < requests; i++) request(i);
const wallMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
await new Promise((resolve) => setTimeout(resolve, 50)); // the observer's last entries
minor.sort((a, b) => a - b);
const total = minor.reduce((a, b) => a + b, 0);
process.stdout.write(
  JSON.stringify({
    node: process.version,
    flags: process.execArgv.join(' '),
    batch: batchSize,
    requests,
    scavenges: minor.length,
    scavengeMsTotal: Number(total.toFixed(1)),
    scavengeMsMean: Number((total / minor.length).toFixed(3)),
    scavengeMsP99: minor[Math.ceil(minor.length * 0.99) - 1],
    scavengeMsMax: minor.at(-1),
    wallMs: Math.round(wallMs),
    cpuUsPerRequest: Number(((cpu.user + cpu.system) / requests).toFixed(2)),
    check: (sink + exportedBytes + longLived.length) % 7,
  }) + '\n',
);
