// The hostile run's class 8: a bad day around a well-behaved client (a hanging collector), in the
// shape of http-cases.mjs.
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { NODE, max, scrapeSdkCounters } from '../lib.mjs';
import { bytesOf, messages } from '../otlp-protobuf.mjs';
import { MB, POD_HEAP, health, runWorker, startHealthProbe, statusText } from './harness.mjs';

/** 8. A collector that accepts connections and never answers, while clients send 7.5 KB User-Agents (the largest an 8 KiB request head takes). */
export async function hangingCollector(ctx) {
  // The heap the chart gives its pod: what a hanging collector leaves queued must fit in it.
  const flag = POD_HEAP;
  const heapLimitMb = Number(execFileSync(NODE, [...flag.split(' '), '-p', 'require("v8").getHeapStatistics().heap_size_limit']).toString()) / MB;
  const collector = await startHangingCollector();
  ctx.onCleanup(() => collector.close());
  const svc = await ctx.start('hanging-collector', {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    NODE_OPTIONS: flag,
    SHUTDOWN_TIMEOUT: '5',
  });
  const probe = startHealthProbe(svc.port);
  const load = await runWorker('keepalive', { port: svc.port, connections: 8, seconds: 15, userAgentBytes: 7_500 });
  const h = await probe.stop();
  const sdk = await scrapeSdkCounters(svc.metricsPort);
  const exit = await svc.stop('SIGTERM', 15_000);
  const spans = collector.requests.flatMap((body) => decodeSpans(body));
  const longest = max(spans.map((s) => (s['user_agent.original'] ?? '').length));
  const peak = svc.peakRssMb();
  return [
    {
      sent: `OTLP endpoint that never answers; 15 s \`POST /product\` with 7.5 KB User-Agents on 8 connections; \`NODE_OPTIONS=${flag}\` (the heap the chart gives in its 384 Mi pod; V8 heap limit ${heapLimitMb.toFixed(0)} MB)`,
      got: `${load.ok} answered (${statusText(load)}); collector got ${collector.requests.length} exports, ${spans.length} spans, longest user_agent.original ${longest} chars; ${sdk?.dropped ?? '?'} spans dropped (queue full); ${health(h)}; exit ${exit.code ?? exit.signal} in ${(exit.ms / 1000).toFixed(1)} s`,
      failures: [
        ...(peak < 384 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ 384 MiB`]),
        ...(spans.length > 0 ? [] : ['no export reached the collector']),
        ...(longest <= 1024 ? [] : [`attribute of ${longest} chars (limit 1024)`]),
        ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
        ...(load.failed === 0 ? [] : [`${load.failed} requests failed`]),
      ],
      rssMb: peak,
      details: { flag, heapLimitMb, load, health: h, sdk, exit, exports: collector.requests.length, spans: spans.length, longest },
    },
  ];
}

async function startHangingCollector() {
  const requests = [];
  const server = http.createServer((req) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push(req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** The string attributes of every span of an ExportTraceServiceRequest (resource_spans 1 > scope_spans 2 > spans 2 > attributes 9). */
function decodeSpans(body) {
  const spans = [];
  for (const resourceSpans of messages(body, 1)) {
    for (const scopeSpans of messages(resourceSpans, 2)) {
      for (const span of messages(scopeSpans, 2)) {
        const attributes = {};
        for (const keyValue of messages(span, 9)) {
          const key = bytesOf(keyValue, 1).toString('utf8');
          const text = messages(bytesOf(keyValue, 2), 1)[0]; // AnyValue.string_value
          if (key && text) attributes[key] = text.toString('utf8');
        }
        spans.push(attributes);
      }
    }
  }
  return spans;
}
