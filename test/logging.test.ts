// Runs: src in-process where the answer is what matters, dist/main.js where the real process does.
//
// The log stream: JSON lines a log pipeline can index without configuration, one line per
// request (probes only at debug), never a request body, and unexpected errors logged in full
// while the client learns nothing about them.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { sampleValue } from './support/exposition';
import { inProcessForTest } from './support/in-process';
import { serviceForTest, VERSION } from './support/service-process';

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const post = (baseUrl: string, body = '{}'): Promise<Response> =>
  fetch(`${baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

describe('the built service at the default level (info)', () => {
  it('writes JSON lines with a level word, ISO time, service and version; one line per request with the product_id it issued; never the body', async () => {
    const svc = await serviceForTest();
    const marker = 'body-marker-7f3a9c';
    const issued: unknown[] = [];
    for (let i = 0; i < 3; i += 1) {
      const response = await post(svc.baseUrl, `{"name":"${marker}-${i}"}`);
      expect(response.status).toBe(201);
      issued.push(((await response.json()) as { product_id: unknown }).product_id);
    }
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);
    expect((await fetch(`${svc.baseUrl}/nope`)).status).toBe(404);
    await svc.waitForLog((line) => line.msg === 'request completed' && line.route === 'unmatched');

    const requestLines = svc.logLines().filter((line) => line.msg === 'request completed');
    expect(requestLines.map((line) => line.route)).toEqual(['/product', '/product', '/product', 'unmatched']);
    for (const line of requestLines.slice(0, 3)) {
      expect(line).toMatchObject({ level: 'info', method: 'POST', route: '/product', status: 201 });
      expect(typeof line.duration_ms).toBe('number');
      expect(line.duration_ms).toBeGreaterThanOrEqual(0);
    }
    // The id a caller quotes leads to its request's line.
    expect(requestLines.map((line) => line.product_id)).toEqual([...issued, undefined]);
    expect(requestLines[3]).toMatchObject({ level: 'info', method: 'GET', status: 404 });

    // stop() resolves once stdout is closed, so every line the process wrote has been read.
    expect(await svc.stop('SIGTERM')).toBe(0);
    const lines = svc.logLines();
    expect(lines.filter((line) => 'raw' in line)).toEqual([]);
    for (const line of lines) {
      expect(line).toMatchObject({ service: 'product-service', version: VERSION });
      expect(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).toContain(line.level);
      expect(line.time).toMatch(ISO_8601);
      expect(Number.isNaN(Date.parse(String(line.time)))).toBe(false);
    }
    const messages = lines.map((line) => String(line.msg));
    expect(messages[0]).toBe('product-service listening');
    // Where it listens; no probe port unless PROBE_PORT names one.
    expect(lines[0]).toMatchObject({ port: svc.port, metrics_port: svc.metricsPort, host: '127.0.0.1', node: process.version });
    expect(lines[0]).not.toHaveProperty('probe_port');
    // Nothing to warn of at the defaults: no fault injected (FAULT_*), no public trusted range.
    expect(lines.filter((line) => line.level === 'warn')).toEqual([]);
    expect(messages.some((msg) => msg.startsWith('shutdown started'))).toBe(true);
    // In order, to the last line: an exit that does not wait for the asynchronous stdout writes
    // loses or reorders the lines that say why the process ended.
    expect(messages.at(-1)).toBe('shutdown complete');
    const times = lines.map((line) => String(line.time));
    expect(times).toEqual([...times].sort());
    expect(JSON.stringify(lines)).not.toContain(marker);
    expect(svc.stderr()).toBe('');
  });
});

describe('LOG_LEVEL', () => {
  it('debug adds the /health request lines, at level debug', async () => {
    const svc = await serviceForTest({ LOG_LEVEL: 'debug' });
    expect((await fetch(`${svc.baseUrl}/health`)).status).toBe(200);
    const line = await svc.waitForLog((l) => l.msg === 'request completed' && l.route === '/health');
    expect(line).toMatchObject({ level: 'debug', method: 'GET', status: 200, service: 'product-service', version: VERSION });
  });

  it('silent writes nothing, on stdout or stderr', async () => {
    const svc = await serviceForTest({ LOG_LEVEL: 'silent' });
    expect((await post(svc.baseUrl)).status).toBe(201);
    expect((await fetch(`${svc.baseUrl}/nope`)).status).toBe(404);
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(svc.stdout() + svc.stderr()).toBe('');
  });
});

describe('an unexpected error while serving a request', () => {
  it('is logged with its stack, answered 500 problem+json without details, and the next request succeeds', async () => {
    let failNext = true;
    const svc = await inProcessForTest({
      issueProductId: () => {
        if (failNext) {
          failNext = false;
          throw new Error('boom-marker');
        }
        return 42;
      },
    });
    const failed = await post(svc.baseUrl);
    expect(failed.status).toBe(500);
    expect(failed.headers.get('content-type')).toBe('application/problem+json');
    const body = await failed.text();
    // The one thing the caller learns: the id to quote, in the header and the body.
    const traceId = /^00-([0-9a-f]{32})-[0-9a-f]{16}-0[01]$/.exec(failed.headers.get('traceresponse') ?? '')?.[1];
    expect(traceId).toBeDefined();
    expect(JSON.parse(body)).toMatchObject({ type: 'about:blank', title: 'Internal Server Error', status: 500, trace_id: traceId });
    expect(body).not.toContain('boom-marker');
    expect(body).not.toMatch(/\bat .*:\d+:\d+|node_modules|\.ts\b|\.js\b/);

    const errorLines = svc.logs.filter((line) => line.level === 'error');
    expect(errorLines).toHaveLength(1);
    const err = errorLines[0]?.err as { message?: string; stack?: string; type?: string } | undefined;
    expect(err?.type).toBe('Error');
    expect(err?.message).toBe('boom-marker');
    expect(err?.stack).toContain('boom-marker');
    expect(errorLines[0]).toMatchObject({ method: 'POST', route: '/product', status: 500, trace_id: traceId });
    expect(svc.logs.find((line) => line.msg === 'request completed')).toMatchObject({ level: 'info', route: '/product', status: 500, trace_id: traceId });

    const next = await post(svc.baseUrl);
    expect(next.status).toBe(201);
    expect(await next.json()).toEqual({ product_id: 42 });
    expect(svc.metrics.registry.getSingleMetric('product_ids_issued_total')).toBeDefined();
    expect(sampleValue(await svc.exposition(), 'product_ids_issued_total')).toBe(1);
  });
});

describe('a failure nothing handled (a throw from an event listener, a rejected promise nobody awaits)', () => {
  it.each([
    ['throw', 'uncaught exception'],
    ['Promise.reject', 'unhandled promise rejection'],
  ])('%s: one fatal JSON line with the error and its stack, then exit 1', async (how, message) => {
    // A preload schedules the failure once the service is up: nothing in the service can be made to fail so.
    const dir = mkdtempSync(join(tmpdir(), 'uncaught-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const preload = join(dir, 'fail-later.js');
    const fail = how === 'throw' ? "throw new Error('unhandled-marker')" : "void Promise.reject(new Error('unhandled-marker'))";
    writeFileSync(preload, `process.once('SIGUSR2', () => { ${fail}; });\n`);
    const svc = await serviceForTest({ NODE_OPTIONS: `--require ${preload}` });
    svc.child.kill('SIGUSR2');
    expect(await svc.exited).toBe(1);
    const fatal = svc.logLines().filter((line) => line.level === 'fatal');
    expect(fatal).toMatchObject([{ msg: message, err: { type: 'Error', message: 'unhandled-marker' } }]);
    expect((fatal[0]?.err as { stack?: string }).stack).toContain('fail-later.js');
    expect(svc.stderr()).toBe('');
  });
});

describe('the buffered stdout under sustained load', () => {
  it('loses no request line and writes nothing on stderr', async () => {
    const svc = await serviceForTest({ OTEL_SDK_DISABLED: 'true' });
    let sent = 0;
    const until = Date.now() + 4000; // more than a dozen periodic flushes while writes never stop
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (Date.now() < until) {
          const response = await fetch(`${svc.baseUrl}/product`, { method: 'POST', body: '{}' });
          await response.arrayBuffer();
          sent += 1;
        }
      }),
    );
    expect(await svc.stop()).toBe(0);
    const requestLines = svc.logLines().filter((line) => line.msg === 'request completed');
    expect(requestLines).toHaveLength(sent);
    expect(svc.stderr()).toBe('');
  });
});
