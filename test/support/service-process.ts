import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, onTestFinished, vi } from 'vitest';
import { mutantSpawnOptions } from './mutants';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver';
import { MAIN, ROOT, SRC } from './paths';

/** package.json's version: what the built service reports as its version (log lines, resource, build info). */
export const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** A stdout line of the service: parsed where it is JSON, else { raw: the line }. */
export type LogLine = Record<string, unknown>;

/** `count` ports the OS picks, held open together so that it cannot hand the same one out twice. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer().listen(0, '127.0.0.1'));
  await Promise.all(servers.map((server) => once(server, 'listening')));
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => once(server.close(), 'close')));
  return ports;
}

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port as number;
}

/** The resident set size of process `pid`, in MiB (Linux). */
export const rssMiB = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

export type ServiceProcess = Awaited<ReturnType<typeof startService>>;

/**
 * `node dist/main.js` as production starts it, on the Node running the tests. `env` is added to a
 * clean environment: OTEL_* from the caller's shell never leak in. Under Stryker, it also gets the
 * active mutant (./mutants.ts).
 */
function spawnMain(env: Record<string, string>, stdout: 'pipe' | number = 'pipe'): ChildProcess {
  assertBuilt();
  const mutants = mutantSpawnOptions();
  const child = spawn(process.execPath, [...mutants.args, MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', ...env, ...mutants.env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  mutants.track(child);
  return child;
}

/**
 * `npm test` builds dist/ first, a lone `vitest run test/x.test.ts` does not: a missing or older
 * build fails here instead of testing yesterday's code.
 */
function assertBuilt(): void {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} does not exist: run \`npm run build\` first (\`npm test\` does)`);
  const built = statSync(MAIN).mtimeMs;
  const newer = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((file) => statSync(join(SRC, file)).mtimeMs > built);
  if (newer.length > 0) throw new Error(`src/ changed after dist/ was built (${newer.join(', ')}): run \`npm run build\` first (\`npm test\` does)`);
}

export function collectLogLines(stream: Readable, lines: LogLine[]): void {
  let pending = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (pending + chunk).split('\n');
    pending = parts.pop() ?? '';
    for (const part of parts) {
      try {
        lines.push(JSON.parse(part) as LogLine);
      } catch {
        lines.push({ raw: part });
      }
    }
  });
}

export function exitWithin(exited: Promise<number | string>, timeoutMs: number): Promise<number | string> {
  return Promise.race([exited, sleep(timeoutMs, 'still running')]);
}

/**
 * Starts the service on free ports (unless `env` names them), resolved once /health answers. Given
 * a file descriptor for stdout (e.g. /dev/null under heavy load), the test reads no log lines.
 */
export async function startService(env: Record<string, string> = {}, stdoutFd?: number) {
  const [apiFree, metricsFree] = await freePorts(2);
  const port = env.PORT !== undefined ? Number(env.PORT) : (apiFree as number);
  const metricsPort = env.METRICS_PORT !== undefined ? Number(env.METRICS_PORT) : (metricsFree as number);
  const child = spawnMain({ PORT: String(port), METRICS_PORT: String(metricsPort), ...env }, stdoutFd ?? 'pipe');
  const lines: LogLine[] = [];
  let stdout = '';
  let stderr = '';
  let closed = false;
  if (child.stdout !== null) collectLogLines(child.stdout, lines);
  child.stdout?.on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | string>((resolve) => {
    // 'close', not 'exit': only then has the last of stdout been read.
    child.once('close', (code, signal) => {
      closed = true;
      resolve(code ?? signal ?? 'unknown');
    });
  });

  const waitForLog = async (predicate: (line: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> => {
    // undefined: the process has ended (and its stdout been read) without writing the line.
    const found = await vi.waitFor(
      () => {
        const line = lines.find(predicate);
        if (line !== undefined || closed) return line;
        throw new Error(`no matching log line within ${timeoutMs} ms; stdout: ${JSON.stringify(lines.slice(-20))}`);
      },
      { timeout: timeoutMs, interval: 20 },
    );
    if (found === undefined) throw new Error(`service exited before the expected log line; stderr: ${stderr}; stdout: ${JSON.stringify(lines)}`);
    return found;
  };

  const service = {
    child,
    port,
    metricsPort,
    baseUrl: `http://127.0.0.1:${port}`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    logLines: (): LogLine[] => lines,
    stdout: (): string => stdout,
    stderr: (): string => stderr,
    exited,
    waitForLog,
    async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | string> {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  try {
    await waitUntilHealthy(service.baseUrl, child, () => stderr);
  } catch (error) {
    // Not healthy in time: the caller gets no handle to stop it, so it is stopped here.
    await service.stop('SIGKILL');
    throw error;
  }
  return service;
}

/** startService for the test that calls it: killed once the test has finished. */
export async function serviceForTest(env: Record<string, string> = {}, stdoutFd?: number): Promise<ServiceProcess> {
  const svc = await startService(env, stdoutFd);
  onTestFinished(async () => {
    await svc.stop('SIGKILL');
  });
  return svc;
}

/** A receiver and a service exporting to it every 200 ms, for the describe block that calls it. */
export function exportingServiceForSuite(env: Record<string, string> = {}): { collector: OtlpReceiver; svc: ServiceProcess } {
  const shared: { collector?: OtlpReceiver; svc?: ServiceProcess } = {};
  beforeAll(async () => {
    shared.collector = await startOtlpReceiver('ok');
    shared.svc = await startService({ OTEL_EXPORTER_OTLP_ENDPOINT: shared.collector.url, OTEL_BSP_SCHEDULE_DELAY: '200', ...env });
  });
  // What beforeAll could not start is not stopped.
  afterAll(async () => {
    await shared.svc?.stop('SIGKILL');
    await shared.collector?.close();
  });
  return shared as { collector: OtlpReceiver; svc: ServiceProcess };
}

/** Runs the entry point to completion (for configurations that must stop it) and returns what it said; as slow as a start (waitUntilHealthy) under load. */
export async function runServiceToExit(env: Record<string, string>, timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnMain({ PORT: '0', METRICS_PORT: '0', ...env });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * Waits until GET `baseUrl`/health answers 200, the one readiness signal whatever LOG_LEVEL says;
 * fails at once when `child` exits first, or after `timeoutMs`, with what it wrote on stderr.
 * A start at low priority on a loaded 2-core machine (a mutation run beside a benchmark) has taken 10 s.
 */
async function waitUntilHealthy(baseUrl: string, child: ChildProcess, stderr: () => string, timeoutMs = 20_000): Promise<void> {
  const healthy = await vi.waitFor(
    async () => {
      if (child.exitCode !== null) return false;
      const status = await fetch(`${baseUrl}/health`).then(
        (response) => response.status,
        () => 'not listening',
      );
      if (status !== 200) throw new Error(`service not healthy within ${timeoutMs} ms (${status}); stderr: ${stderr()}`);
      return true;
    },
    { timeout: timeoutMs, interval: 20 },
  );
  if (!healthy) throw new Error(`service exited with ${String(child.exitCode)} before it was healthy; stderr: ${stderr()}`);
}
