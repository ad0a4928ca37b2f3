// The hostile run's classes 7-11: bad days around a well-behaved client (a stuck stdout, a hanging
// collector, callers forcing sampling, configuration mistakes, shutdown under load), in the shape
// of http-cases.mjs.
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync } from 'node:zlib';
import { NODE, max, metricSum, request, scrapeSdkCounters } from '../lib.mjs';
import { bytesOf, messages } from '../otlp-protobuf.mjs';
import { startSink as startOtlpSink } from '../otlp-sink.mjs';
import { MB, POD_HEAP, WORK, health, runWorker, startHealthProbe, statusText } from './harness.mjs';

/** 7. stdout is a pipe nobody reads any more (a stuck log shipper): requests, memory and exit must not depend on it. */
export async function stuckStdout(ctx) {
  fs.mkdirSync(WORK, { recursive: true });
  const fifo = path.join(WORK, 'stdout.fifo');
  const headPath = path.join(WORK, 'stuck-stdout.head');
  fs.rmSync(fifo, { force: true });
  await new Promise((resolve, reject) => spawn('mkfifo', [fifo]).on('exit', (c) => (c === 0 ? resolve() : reject(new Error('mkfifo failed')))));
  // The reader keeps the FIFO open but stops reading after the first 5 lines, as a stuck shipper does.
  const reader = spawn('sh', ['-c', 'exec 0<"$1"; head -n 5 > "$2"; exec sleep 600', 'sh', fifo, headPath], { stdio: 'ignore' });
  ctx.onCleanup(() => reader.kill('SIGKILL'));
  // Opened in the thread pool: open(2) of a FIFO for writing waits for its reader.
  const handle = await Promise.race([
    fs.promises.open(fifo, 'w'),
    sleep(5000).then(() => {
      throw new Error('FIFO reader did not open');
    }),
  ]);
  const svc = await ctx.start('stuck-stdout', { SHUTDOWN_TIMEOUT: '5' }, { stdoutFd: handle.fd });
  await handle.close();
  const probe = startHealthProbe(svc.port);
  const load = await runWorker('keepalive', { port: svc.port, connections: 8, seconds: 20 });
  const h = await probe.stop();
  const dropped = metricSum(await svc.metrics(), 'product_service_log_lines_dropped_total');
  const exit = await svc.stop('SIGTERM', 15_000);
  const peak = svc.peakRssMb();
  const read = fs.existsSync(headPath) ? fs.readFileSync(headPath, 'utf8').split('\n').filter(Boolean).length : 0;
  // The same load with stdout to a file: tells what the stuck pipe costs apart from what the load costs.
  const control = await ctx.start('stuck-stdout-control');
  const controlLoad = await runWorker('keepalive', { port: control.port, connections: 8, seconds: 20 });
  await control.stop();
  return [
    {
      sent: 'stdout = FIFO whose reader stops after 5 lines; 20 s `POST /product` on 8 keep-alive connections; then SIGTERM (`SHUTDOWN_TIMEOUT=5`)',
      got: `${load.ok} answered (${statusText(load)}); ${health(h)}; ${dropped} log lines dropped; exit ${exit.code ?? exit.signal} ${(exit.ms / 1000).toFixed(1)} s after SIGTERM (reader got ${read} lines); same load, stdout to a file: ${controlLoad.ok} answered, peak ${control.peakRssMb().toFixed(0)} MB`,
      failures: [
        ...(h.failures === 0 ? [] : [`${h.failures} /health probes failed`]),
        // The load alone grows the heap; the stuck pipe may add its 8 MiB buffer and little more.
        ...(peak < control.peakRssMb() + 24 ? [] : [`peak RSS ${peak.toFixed(0)} MB ≥ ${control.peakRssMb().toFixed(0)} MB (stdout to a file) + 24 MB`]),
        ...(dropped > 0 ? [] : ['no dropped lines counted']),
        ...(exit.code === 0 && exit.ms <= 5000 ? [] : [`exit ${exit.code ?? exit.signal} after ${(exit.ms / 1000).toFixed(1)} s (expected 0 within 5 s)`]),
        ...(load.failed === 0 ? [] : [`${load.failed} requests failed`]),
      ],
      rssMb: peak,
      details: { load, health: h, dropped, exit, control: { load: controlLoad, peakRssMb: control.peakRssMb() } },
    },
  ];
}

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

/**
 * 9. Can a caller force its request to be sampled? Only a trusted proxy's flag counts, and only
 * under parentbased_* (as specified); an untrusted caller's traceparent is not read at all.
 */
export async function forcedSampling(ctx) {
  const rows = [];
  for (const [sampler, trusted, expectation] of [
    ['parentbased_traceidratio', '', (n) => n <= 10],
    ['parentbased_traceidratio', '127.0.0.1', (n) => n === 200],
    ['traceidratio', '127.0.0.1', (n) => n <= 10],
  ]) {
    const sink = await startOtlpSink();
    ctx.onCleanup(() => sink.close());
    const svc = await ctx.start(`sampling-${sampler}${trusted === '' ? '' : '-trusted'}`, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
      TRACE_CONTEXT_FROM: trusted,
      OTEL_TRACES_SAMPLER: sampler,
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    let answered = 0;
    for (let i = 0; i < 200; i++) {
      // Fixed trace ids (a hash of i), so that the ratio sampler's count is the same on every run.
      const traceId = crypto.createHash('sha256').update(`hostile-${i}`).digest('hex').slice(0, 32);
      const traceparent = `00-${traceId}-${traceId.slice(0, 16)}-01`;
      const res = await request(svc.port, 'POST', '/product', undefined, 2000, { traceparent });
      if (res.status === 201) answered++;
    }
    const exit = await svc.stop(); // flushes the spans still queued
    const spans = sink.stats().traces.items;
    rows.push({
      sent: `200 \`POST /product\` with \`traceparent …-01\`; \`OTEL_TRACES_SAMPLER=${sampler}\`, \`_ARG=0.01\`; \`TRACE_CONTEXT_FROM=${trusted || '(unset)'}\``,
      got: `${answered} answered 201; ${spans} spans received (expected ${expectation(200) ? '200' : '~2'}); exit ${exit.code}`,
      failures: [...(expectation(spans) ? [] : [`${spans} spans`]), ...(answered === 200 ? [] : [`${200 - answered} requests not answered 201`])],
      rssMb: svc.peakRssMb(),
      details: { spans, answered, exit },
    });
  }
  return rows;
}

/** 10. Configuration mistakes: one stderr line each; the service's own settings stop it, OTEL ones do not. */
export async function badConfiguration(ctx) {
  const cases = [
    { env: { BODY_LIMIT: '1.5' }, fatal: true },
    { env: { PORT: 'abc' }, fatal: true },
    { env: { OTEL_RESOURCE_ATTRIBUTES: 'team=shop,broken' }, fatal: false },
    { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'not-a-url' }, fatal: false },
  ];
  const rows = [];
  for (const [i, c] of cases.entries()) {
    const [name, value] = Object.entries(c.env)[0];
    const svc = await ctx.start(`config-${i}`, c.env, { allowExit: true });
    let outcome;
    if (svc.exited()) {
      const e = svc.exited();
      outcome = { code: e.code, running: false };
    } else {
      // Still running: a request gives the exporter something to send, SIGTERM flushes it, so a
      // complaint that only comes at export time is seen too.
      const res = await request(svc.port, 'POST', '/product', '{}');
      const exit = await svc.stop();
      outcome = { code: exit.code, running: true, status: res.status };
    }
    const lines = svc.stderrLines();
    rows.push({
      sent: `\`${name}=${value}\``,
      got: `${outcome.running ? `kept running (POST → ${outcome.status}), exit ${outcome.code} on SIGTERM` : `exit ${outcome.code} before listening`}; stderr ${lines.length} line${lines.length === 1 ? '' : 's'}: ${lines.map((l) => `\`${l.slice(0, 160)}\``).join(' / ')}`,
      failures: [
        ...(c.fatal && !(outcome.code === 1 && !outcome.running) ? ['expected exit 1 before listening'] : []),
        ...(!c.fatal && !(outcome.running && outcome.status === 201 && outcome.code === 0) ? ['expected to keep running'] : []),
        ...(lines.length === 1 ? [] : [`${lines.length} stderr lines, expected 1`]),
      ],
      rssMb: svc.peakRssMb(),
      details: { outcome, stderr: lines },
    });
  }
  return rows;
}

/**
 * 11. SIGTERM under keep-alive load with SHUTDOWN_DELAY=1. First as production sees it: the
 * balancer stops sending 0.5 s after the signal (within the delay), and no request may fail. Then
 * clients that never stop: a connection still in the listen backlog when the listener closes is
 * reset by the kernel, but a request on a kept-alive connection must never fail.
 */
export async function shutdownUnderLoad(ctx) {
  const rows = [];
  for (const balanced of [true, false]) {
    const svc = await ctx.start(`shutdown-${balanced ? 'balanced' : 'unbounded'}`, { SHUTDOWN_DELAY: '1' });
    const sigtermAt = Date.now() + 2500;
    const loadDone = runWorker('keepalive', {
      port: svc.port,
      connections: 16,
      seconds: 10,
      countAfter: sigtermAt,
      stopAt: balanced ? sigtermAt + 500 : undefined,
    });
    await sleep(sigtermAt - Date.now());
    const exit = await svc.stop('SIGTERM');
    const load = await loadDone;
    // Balanced, no request may fail; unbounded, none on a kept-alive connection.
    const served = balanced ? load.failed === 0 : load.failedReused === 0 && Object.keys(load.statuses).every((s) => s === '201');
    rows.push({
      sent: balanced
        ? '`POST /product` on 16 keep-alive connections, SIGTERM 2.5 s in, `SHUTDOWN_DELAY=1`; clients stop 0.5 s after SIGTERM (as a balancer does)'
        : 'the same, but clients never stop: they send until refused',
      got: `${load.ok} answered (${statusText(load)}), ${load.okAfter} of them after SIGTERM; ${load.refused} connects refused; exit ${exit.code ?? exit.signal} ${(exit.ms / 1000).toFixed(2)} s after SIGTERM`,
      failures: [
        ...(served ? [] : [balanced ? `${load.failed} requests failed` : `${load.failedReused} requests failed on a kept-alive connection`]),
        ...(exit.code === 0 ? [] : [`exit ${exit.code ?? exit.signal}`]),
        ...(load.okAfter > 0 ? [] : ['nothing was served after SIGTERM']),
      ],
      rssMb: svc.peakRssMb(),
      details: { load, exit },
    });
  }
  return rows;
}
