// Runs: dist/main.js (test/support/service-process.ts; `npm test` builds dist/ first).

import { Agent, request, type ClientRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startOtlpReceiver } from './support/otlp-receiver';
import { exitWithin, serviceForTest } from './support/service-process';

interface Outcome {
  status?: number;
  error?: string;
}

function post(port: number, agent: Agent): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/product', agent, headers: { 'Content-Type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.end('{"name":"chair"}');
  });
}

function startSlowUpload(port: number): { req: ClientRequest; outcome: Promise<Outcome> } {
  let req!: ClientRequest;
  const outcome = new Promise<Outcome>((resolve) => {
    req = request({ host: '127.0.0.1', port, method: 'POST', path: '/product', headers: { 'Transfer-Encoding': 'chunked' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.write('{"part":1');
  });
  return { req, outcome };
}

/** A service exporting to a collector that hangs or refuses, with one span left for the shutdown's flush. */
async function serviceWithSpanLeft(collectorMode: 'hang' | 'error', env: Record<string, string> = {}) {
  const collector = await startOtlpReceiver(collectorMode, { errorStatus: 500 }); // 500 is not retried
  onTestFinished(() => collector.close());
  const service = await serviceForTest({ SHUTDOWN_DELAY: '0', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '60000', ...env });
  expect((await post(service.port, new Agent())).status).toBe(201);
  return service;
}

describe('graceful shutdown', () => {
  it('SIGTERM under concurrent keep-alive load loses no request that was sent, and exits 0', async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '1', SHUTDOWN_TIMEOUT: '5', LOG_LEVEL: 'warn' });
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const outcomes: Outcome[] = [];
    let signalledAt = Infinity;
    // A balancer keeps sending until the endpoint removal reaches it, shortly after the signal.
    const stopAfterSignalMs = 300;
    const clients = Array.from({ length: 16 }, async () => {
      while (Date.now() < signalledAt + stopAfterSignalMs) outcomes.push(await post(service.port, agent));
    });
    await sleep(500);
    const before = outcomes.length;
    signalledAt = Date.now();
    service.child.kill('SIGTERM');
    await Promise.all(clients);
    const sentAfterSignal = outcomes.length - before;
    const code = await exitWithin(service.exited, 10_000);
    agent.destroy();

    expect(before).toBeGreaterThan(50);
    expect(sentAfterSignal).toBeGreaterThan(10);
    const failures = outcomes.filter((outcome) => outcome.status !== 201);
    expect(failures).toEqual([]);
    expect(code).toBe(0);
  });

  it('answers with Connection: close during the delay, then stops listening', async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '1', SHUTDOWN_TIMEOUT: '5' });
    service.child.kill('SIGTERM');
    const started = await service.waitForLog((line) => String(line.msg).startsWith('shutdown started'));
    expect(started).toMatchObject({ signal: 'SIGTERM', delay_s: 1, timeout_s: 5 });
    const during = await fetch(`${service.baseUrl}/health`);
    expect(during.status).toBe(200);
    expect(during.headers.get('connection')).toBe('close');
    await service.waitForLog((line) => String(line.msg).startsWith('shutdown: listener closed'));
    await expect(fetch(`${service.baseUrl}/health`)).rejects.toThrow();
    expect(await exitWithin(service.exited, 10_000)).toBe(0);
  });

  it('lets an in-flight request finish after the listener closed', async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '0', SHUTDOWN_TIMEOUT: '10' });
    const upload = startSlowUpload(service.port);
    await sleep(200);
    service.child.kill('SIGTERM');
    await service.waitForLog((line) => String(line.msg).startsWith('shutdown: listener closed'));
    await sleep(500);
    expect(service.child.exitCode).toBeNull();
    upload.req.end(',"part":2}');
    expect(await upload.outcome).toEqual({ status: 201 });
    // Its connection, kept alive by the client, is closed once idle: the drain does not wait for the timeout.
    expect(await exitWithin(service.exited, 3000)).toBe(0);
    expect(service.logLines().some((line) => String(line.msg).includes('timeout reached'))).toBe(false);
  });

  it('gives up on in-flight requests after SHUTDOWN_TIMEOUT, closing them before the last spans are flushed, and still exits 0', async () => {
    // A collector that never answers holds the flush for its whole budget (1 s once the timeout has passed).
    const service = await serviceWithSpanLeft('hang', { SHUTDOWN_TIMEOUT: '1' });
    const upload = startSlowUpload(service.port);
    await sleep(200);
    const started = Date.now();
    service.child.kill('SIGTERM');
    const outcome = await upload.outcome;
    const cutAt = Date.now();
    await service.waitForLog((line) => String(line.msg).includes('telemetry flush did not finish'));
    expect(outcome.error).toBeDefined();
    // Cut when the timeout ended, not left open until the process exits after the flush.
    expect(Date.now() - cutAt).toBeGreaterThan(500);
    expect(await exitWithin(service.exited, 10_000)).toBe(0);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(service.logLines().find((line) => String(line.msg).includes('timeout reached'))).toMatchObject({ level: 'warn', timeout_s: 1 });
  });

  it('gives the last spans what is left of SHUTDOWN_TIMEOUT once the requests are drained, and says so when a collector takes it all', async () => {
    const service = await serviceWithSpanLeft('hang', { SHUTDOWN_TIMEOUT: '3' });
    service.child.kill('SIGTERM');
    expect(await exitWithin(service.exited, 10_000)).toBe(0);
    const warning = service.logLines().find((line) => String(line.msg).includes('telemetry flush did not finish'));
    expect(warning?.budget_ms).toBeGreaterThan(2000);
    expect(warning?.budget_ms).toBeLessThanOrEqual(3000);
  });

  it('exits 0 with a warning when the collector refuses the last spans', async () => {
    const service = await serviceWithSpanLeft('error');
    service.child.kill('SIGTERM');
    expect(await exitWithin(service.exited, 10_000)).toBe(0);
    const warnings = service.logLines().filter((line) => line.level === 'warn');
    expect(warnings.map((line) => line.msg)).toEqual(['shutdown: the last spans could not be exported']);
    expect(warnings[0]?.err).toHaveProperty('message');
  });

  it('a second signal exits at once with code 1', async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '30', SHUTDOWN_TIMEOUT: '30' });
    service.child.kill('SIGTERM');
    await service.waitForLog((line) => String(line.msg).startsWith('shutdown started'));
    service.child.kill('SIGTERM');
    expect(await exitWithin(service.exited, 5000)).toBe(1);
    expect(service.logLines().at(-1)).toMatchObject({ signal: 'SIGTERM', msg: 'second signal during shutdown: exiting now' });
  });

  it("two SIGINTs within half a second are one Ctrl-C (the terminal's and npm's); a later one is a second signal", async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '30', SHUTDOWN_TIMEOUT: '30' });
    service.child.kill('SIGINT');
    // Once the first is handled: two signals pending at once are delivered as one.
    await service.waitForLog((line) => String(line.msg).startsWith('shutdown started'));
    service.child.kill('SIGINT');
    await sleep(700);
    expect(service.child.exitCode).toBeNull();
    service.child.kill('SIGINT');
    expect(await exitWithin(service.exited, 5000)).toBe(1);
    expect(
      service
        .logLines()
        .filter((line) => line.signal === 'SIGINT')
        .map((line) => line.msg),
    ).toEqual(['shutdown started: serving with Connection: close until the delay ends', 'second signal during shutdown: exiting now']);
  });

  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
  ] as const)('%s, then %s within half a second, is a second signal: exits 1 at once', async (first, second) => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '30', SHUTDOWN_TIMEOUT: '30' });
    service.child.kill(first);
    await service.waitForLog((line) => String(line.msg).startsWith('shutdown started'));
    service.child.kill(second);
    expect(await exitWithin(service.exited, 5000)).toBe(1);
  });

  it('SIGINT shuts down like SIGTERM', async () => {
    const service = await serviceForTest({ SHUTDOWN_DELAY: '0' });
    service.child.kill('SIGINT');
    expect(await exitWithin(service.exited, 10_000)).toBe(0);
    expect(service.logLines().at(-1)).toMatchObject({ msg: 'shutdown complete', service: 'product-service' });
  });
});
