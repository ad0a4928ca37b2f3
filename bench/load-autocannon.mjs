// Closed-loop load with autocannon, in its own process (so the harness can pin it to the load
// core); used by bench/run.mjs only when wrk is not installed. Prints one JSON line.
// (Not used for the fixed-rate mode: see load-open.mjs for why.)
//
// Usage: node bench/load-autocannon.mjs '{"url":"http://127.0.0.1:8080/product","duration":10,"connections":50}'
import autocannon from 'autocannon';

const opts = JSON.parse(process.argv[2]);
const result = await autocannon({
  url: opts.url,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{"name":"bench","price":1}',
  connections: opts.connections,
  duration: opts.duration,
});
process.stdout.write(
  'AUTOCANNON_JSON ' +
    JSON.stringify({
      requests: result.requests.total,
      duration_s: result.duration,
      rps: result.requests.total / result.duration,
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      latency_ms: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max, mean: result.latency.mean },
    }) +
    '\n',
);
