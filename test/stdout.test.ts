// Runs: dist/main.js (test/support/service-process.ts; `npm test` builds dist/ first).
//
// A stuck stdout (a FIFO whose reader, a log shipper, stops reading) must hold neither a request,
// nor memory beyond the bounded buffer, nor the exit; the lines it drops are counted on /metrics
// and, once the pipe moves again, in one warn line. The SDK's diagnostics on stderr likewise.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { stderrDiagLogger } from '../src/observability/diagnostics';
import { EXIT_FLUSH_TIMEOUT_MS } from '../src/observability/logger';
import { sampleValue, scrape } from './support/exposition';
import { openFifo, startWithFifoStdout, type FifoService } from './support/fifo-stdout';
import { exitWithin, rssMiB } from './support/service-process';

const DROPPED_METRIC = 'product_service_log_lines_dropped_total';
const DROPPED_MSG = 'log lines dropped while stdout was blocked';
/**
 * Room for what the service holds under this load whatever stdout does (with a stuck stdout requests
 * get faster, so V8's young generation grows to its maximum) plus the full 8 MiB buffer; an unbounded
 * buffer grows with the log volume and passes it within the load below.
 */
const RSS_BOUND_MB = 180;
/** The readiness probe's timeout (helm/product-service/README.md): a slower /health fails it. */
const HEALTH_BOUND_MS = 2000;

/** The log lines dropped so far, as counted on /metrics; the counter is there from the start. */
async function droppedLines(service: FifoService): Promise<number> {
  const dropped = sampleValue(await scrape(service.metricsUrl), DROPPED_METRIC);
  if (dropped === undefined) throw new Error(`${DROPPED_METRIC} is not on /metrics`);
  return dropped;
}

function post(port: number, agent: Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/product', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

interface LoadResult {
  sent: number;
  maxRssMb: number;
  maxHealthMs: number;
}

/** Loads until stdout drops lines (its buffer is full) and `moreMs` longer, sampling RSS and /health. */
async function loadUntilLinesDrop(service: FifoService, moreMs = 1000): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const pid = service.child.pid ?? 0;
  const result: LoadResult = { sent: 0, maxRssMb: rssMiB(pid), maxHealthMs: 0 };
  // Up to a minute: a loaded machine may take that long to fill stdout's 8 MiB buffer.
  let stopAt = Date.now() + 60_000;
  let dropping = false;
  const sampler = async (): Promise<void> => {
    while (Date.now() < stopAt) {
      result.maxRssMb = Math.max(result.maxRssMb, rssMiB(pid));
      const started = Date.now();
      expect((await fetch(`http://127.0.0.1:${service.port}/health`)).status).toBe(200);
      result.maxHealthMs = Math.max(result.maxHealthMs, Date.now() - started);
      if (!dropping && (await droppedLines(service)) > 0) {
        dropping = true;
        stopAt = Date.now() + moreMs;
      }
      await sleep(200);
    }
  };
  const client = async (): Promise<void> => {
    while (Date.now() < stopAt) {
      expect(await post(service.port, agent)).toBe(201);
      result.sent += 1;
    }
  };
  const stopOnFailure = (error: unknown): never => {
    stopAt = 0;
    throw error;
  };
  try {
    await Promise.all([sampler(), ...Array.from({ length: 16 }, client)].map((run) => run.catch(stopOnFailure)));
  } finally {
    agent.destroy();
  }
  result.maxRssMb = Math.max(result.maxRssMb, rssMiB(pid));
  return result;
}

/** Starts the service, lets the reader take the start-up line, then stops reading. */
async function startWithStuckStdout(env: Record<string, string>): Promise<FifoService> {
  const service = await startWithFifoStdout({ OTEL_SDK_DISABLED: 'true', ...env });
  onTestFinished(() => service.close());
  await vi.waitFor(() => expect(service.lines.map((line) => line.msg)).toContain('product-service listening'), {
    timeout: 10_000,
    interval: 20,
    message: 'the start-up line',
  });
  service.pauseReader();
  return service;
}

describe('stdout that stops being read', () => {
  it('holds neither requests nor memory: /health answers, RSS stays bounded, dropped lines are counted, SIGTERM exits 0 in time', async () => {
    const delayS = 0;
    const timeoutS = 3;
    const service = await startWithStuckStdout({ SHUTDOWN_DELAY: String(delayS), SHUTDOWN_TIMEOUT: String(timeoutS) });
    // Long enough for an unbounded buffer to pass RSS_BOUND_MB.
    const load = await loadUntilLinesDrop(service, 8000);
    const dropped = await droppedLines(service);
    console.log(`stuck stdout: ${load.sent} requests, ${dropped} lines dropped, max RSS ${load.maxRssMb.toFixed(1)} MB, max /health ${load.maxHealthMs} ms`);

    expect(dropped).toBeGreaterThan(0);
    expect(load.maxRssMb).toBeLessThan(RSS_BOUND_MB);
    expect(load.maxHealthMs).toBeLessThan(HEALTH_BOUND_MS);
    const started = Date.now();
    expect((await fetch(`http://127.0.0.1:${service.port}/health`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(200);

    // Nobody reads the FIFO: the exit drops what stdout did not take, after EXIT_FLUSH_TIMEOUT_MS at most.
    const signalledAt = Date.now();
    service.child.kill('SIGTERM');
    const budgetMs = (delayS + timeoutS) * 1000 + EXIT_FLUSH_TIMEOUT_MS + 1000;
    const code = await exitWithin(service.exited, budgetMs + 5000);
    const exitMs = Date.now() - signalledAt;
    console.log(`stuck stdout: exit ${String(code)} ${exitMs} ms after SIGTERM`);
    expect(code).toBe(0);
    expect(exitMs).toBeLessThan(budgetMs);
    expect(service.stderr()).toBe('');
  }, 120_000);

  it('a second signal still exits 1 at once', async () => {
    const service = await startWithStuckStdout({ SHUTDOWN_DELAY: '30', SHUTDOWN_TIMEOUT: '30' });
    await loadUntilLinesDrop(service);
    service.child.kill('SIGTERM');
    await sleep(200);
    expect(service.child.exitCode).toBeNull();
    const signalledAt = Date.now();
    service.child.kill('SIGTERM');
    expect(await exitWithin(service.exited, 5000)).toBe(1);
    expect(Date.now() - signalledAt).toBeLessThan(1000);
  }, 120_000);

  it('once the reader reads again, one warn line says how many lines were dropped: as many as the metric counted', async () => {
    const service = await startWithStuckStdout({ SHUTDOWN_DELAY: '0', SHUTDOWN_TIMEOUT: '3' });
    const load = await loadUntilLinesDrop(service);
    const dropped = await droppedLines(service);
    expect(dropped).toBeGreaterThan(0);

    service.resumeReader();
    // Thousands of request lines come first: a boolean keeps the failure message short.
    await vi.waitFor(() => expect(service.lines.some((line) => line.msg === DROPPED_MSG)).toBe(true), {
      timeout: 20_000,
      interval: 20,
      message: 'the dropped-lines warn line',
    });
    const warnLines = service.lines.filter((line) => line.msg === DROPPED_MSG);
    expect(warnLines).toHaveLength(1);
    expect(warnLines[0]).toMatchObject({ level: 'warn', dropped_lines: dropped, service: 'product-service' });
    expect(await droppedLines(service)).toBe(dropped);

    // Written after the lines the buffer held, then new lines follow it as usual.
    const agent = new Agent({ keepAlive: true });
    for (let i = 0; i < 3; i += 1) expect(await post(service.port, agent)).toBe(201);
    agent.destroy();
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    await vi.waitFor(() => expect(service.lines.at(-1)?.msg).toBe('shutdown complete'), { timeout: 10_000, interval: 20, message: 'the last line' });

    const lines = service.lines;
    expect(lines.filter((line) => 'raw' in line)).toEqual([]);
    const requestLines = lines.filter((line) => line.msg === 'request completed');
    expect(requestLines.length + dropped).toBe(load.sent + 3);
    const warnAt = lines.findIndex((line) => line.msg === DROPPED_MSG);
    expect(lines.slice(warnAt + 1).filter((line) => line.msg === 'request completed')).toHaveLength(3);
    const times = lines.map((line) => String(line.time));
    expect(times).toEqual([...times].sort());
    expect(service.stderr()).toBe('');
  }, 120_000);
});

// In-process: stderrDiagLogger writes to the descriptor it is given, here a file or a FIFO's write end.
describe("the SDK's diagnostics on a stderr", () => {
  const onFile = (): { diag: ReturnType<typeof stderrDiagLogger>; file: string } => {
    const dir = mkdtempSync(join(tmpdir(), 'diagnostics-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'stderr');
    const fd = openSync(file, 'w');
    onTestFinished(() => closeSync(fd));
    return { diag: stderrDiagLogger(fd), file };
  };

  it('are one line each, a message of several lines (a stack) joined by single spaces, at each of the five levels', async () => {
    const { diag, file } = onFile();
    diag.error('export failed:\n    at send (exporter.js:1)\n  at flush');
    diag.warn('w');
    diag.info('i');
    diag.debug('d');
    diag.verbose('v');
    await vi.waitFor(() => expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(6), { timeout: 2000, interval: 20 });
    expect(readFileSync(file, 'utf8').split('\n')).toEqual([
      'opentelemetry error: export failed: at send (exporter.js:1) at flush',
      'opentelemetry warn: w',
      'opentelemetry info: i',
      'opentelemetry debug: d',
      'opentelemetry verbose: v',
      '',
    ]);
  });

  it('say a message repeated within a minute once, and how many times more when it comes again after the minute', async () => {
    const { diag, file } = onFile();
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now);
    onTestFinished(() => clock.mockRestore());
    for (let i = 0; i < 3; i += 1) diag.error('export failed: %s', 'ECONNREFUSED');
    diag.info('once a minute');
    clock.mockReturnValue(now + 60_000);
    diag.error('export failed: %s', 'ECONNREFUSED');
    diag.info('once a minute');
    await vi.waitFor(() => expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(5), { timeout: 2000, interval: 20 });
    expect(readFileSync(file, 'utf8').split('\n')).toEqual([
      'opentelemetry error: export failed: ECONNREFUSED',
      'opentelemetry info: once a minute',
      'opentelemetry error: export failed: ECONNREFUSED (and 2 times more in the last minute)',
      'opentelemetry info: once a minute',
      '',
    ]);
  });

  it('forget a message once a thousand others came after it: what they remember is bounded', async () => {
    const { diag, file } = onFile();
    const lines = (): string[] => readFileSync(file, 'utf8').split('\n');
    diag.warn('first');
    // One is written, 64 held, the rest dropped: all are remembered.
    for (let i = 0; i < 1001; i += 1) diag.warn(`other ${i}`);
    await vi.waitFor(() => expect(lines()).toHaveLength(1 + 64 + 1), { timeout: 2000, interval: 20 });
    diag.warn('first');
    await vi.waitFor(() => expect(lines().at(-2)).toMatch(/^opentelemetry warn: first \(/), { timeout: 2000, interval: 20 });
  });

  it('that is not read hold 64 lines besides the one being written, count the rest, and say how many were dropped with the next line', async () => {
    const { reader, writeEnd, remove } = openFifo();
    reader.pause();
    onTestFinished(() => {
      closeSync(writeEnd);
      remove();
    });
    const diag = stderrDiagLogger(writeEnd);
    // Distinct lines of 1 KiB: one is written (into the pipe, or waiting for room there), 64 are held, 35 dropped.
    for (let i = 0; i < 100; i += 1) diag.warn(`${i} ${'x'.repeat(1000)}`);
    let read = '';
    reader.setEncoding('utf8').on('data', (chunk: string) => (read += chunk));
    reader.resume();
    await vi.waitFor(() => expect(read.split('\n')).toHaveLength(1 + 64 + 1), { timeout: 5000, interval: 20 });
    diag.warn('after');
    await vi.waitFor(() => expect(read).toContain('after'), { timeout: 2000, interval: 20 });
    expect(read.split('\n').at(-2)).toBe('opentelemetry warn: after (35 earlier diagnostics dropped: stderr was not being read)');
  });
});
