import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { vi } from 'vitest';
import { MAIN, ROOT } from './paths';

/** A port that was free a moment ago (the OS picks it); good enough on a test machine. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ServiceProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly metricsPort: number;
  readonly baseUrl: string;
  readonly metricsUrl: string;
  /** Every stdout line so far, parsed as JSON where it is JSON. */
  logLines(): Array<Record<string, unknown>>;
  stderr(): string;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  /** Waits until a log line satisfies `predicate`, or fails after `timeoutMs`. */
  waitForLog(predicate: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Starts the built service exactly as production does (`node dist/main.js`, with the Node running
 * the tests) on free ports, and resolves once /health answers. `env` is added to a clean
 * environment: OTEL_* from the caller's shell never leak in.
 */
export async function startService(env: Record<string, string> = {}): Promise<ServiceProcess> {
  const port = env.PORT !== undefined ? Number(env.PORT) : await freePort();
  const metricsPort = env.METRICS_PORT !== undefined ? Number(env.METRICS_PORT) : await freePort();
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = '';
  let closed = false;
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    for (const part of parts) {
      if (part.trim() === '') continue;
      try {
        lines.push(JSON.parse(part) as Record<string, unknown>);
      } catch {
        lines.push({ raw: part });
      }
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | string>((resolve) => {
    // 'close', not 'exit': only then has the last of stdout been read.
    child.once('close', (code, signal) => {
      closed = true;
      resolve(code ?? signal ?? 'unknown');
    });
  });

  const waitForLog = async (predicate: (line: Record<string, unknown>) => boolean, timeoutMs = 10_000): Promise<Record<string, unknown>> => {
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

  const service: ServiceProcess = {
    child,
    port,
    metricsPort,
    baseUrl: `http://127.0.0.1:${port}`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    logLines: () => lines,
    stderr: () => stderr,
    exited,
    waitForLog,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  await waitUntilHealthy(service.baseUrl, child, () => stderr);
  return service;
}

/** Runs the entry point to completion (for configurations that must stop it) and returns what it said. */
export async function runServiceToExit(env: Record<string, string>, timeoutMs = 10_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * Waits until GET `baseUrl`/health answers 200, the one readiness signal whatever LOG_LEVEL says;
 * fails at once when `child` exits first, or after `timeoutMs`, with what it wrote on stderr.
 */
export async function waitUntilHealthy(baseUrl: string, child: ChildProcess, stderr: () => string, timeoutMs = 10_000): Promise<void> {
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
