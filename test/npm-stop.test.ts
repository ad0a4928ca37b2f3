// Runs: `npm start` (dist/main.js: `npm run build` first; `npm test` does it) and `npm run dev` (in a
// scratch copy of the sources, as test/dev-loop.test.ts does), through the real npm on PATH.
//
// Whatever stops npm stops what it runs: an IDE's task runner, `timeout` or a script signals npm's
// PID alone, and npm forwards only SIGINT and SIGTERM, only to its direct child (the dev loop's
// watcher runs in a process group of its own).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { mutantSpawnOptions } from './support/mutants';
import { ROOT } from './support/paths';
import { descendants, processes, scratchCopy } from './support/processes';
import { freePorts } from './support/service-process';

const scratches: string[] = [];
afterAll(() => scratches.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A copy of the sources for one dev loop of its own (each rebuilds dist-dev/ from scratch). */
function scratch(): string {
  scratches.push(scratchCopy('product-service-npm-stop-'));
  return scratches.at(-1) ?? '';
}

const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const probe = createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });

/** Stops what `npm ARGS` runs with `signal` to npm's PID alone, or (group) to its process group as a terminal's Ctrl-C does; resolves to npm's stdout. */
async function stopNpm(args: string[], cwd: string, signal: NodeJS.Signals, group = false): Promise<string> {
  const [port, metricsPort] = (await freePorts(2)) as [number, number];
  // --ignore-scripts: npm start's prestart would rebuild dist/ under the other suites' feet.
  // In a mutation run the service gets the active mutant, and its coverage preload through npm.
  const mutants = mutantSpawnOptions();
  const npm: ChildProcess = spawn('npm', [...args, '--ignore-scripts'], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? tmpdir(),
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      ...mutants.env,
      ...(mutants.args.length > 0 ? { NODE_OPTIONS: mutants.args.join(' ') } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  mutants.track(npm);
  // 'close' comes once every process holding npm's stdout has exited and its last bytes were read.
  const closed = once(npm, 'close');
  let stdout = '';
  let stderr = '';
  npm.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  npm.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const pid = npm.pid ?? 0;
  let tree: number[] = [pid];
  try {
    await vi.waitFor(
      async () => {
        expect((await fetch(`http://127.0.0.1:${port}/health`)).status, stderr).toBe(200);
        // The service listens once the tree is complete (the dev loop: npm, dev.mjs, esbuild, the watcher, the service).
        tree = [pid, ...descendants(pid).map((entry) => entry.pid)];
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(tree.length).toBeGreaterThanOrEqual(2);
    process.kill(group ? -pid : pid, signal);
    await vi.waitFor(
      async () => {
        const alive = new Set(processes().map((entry) => entry.pid));
        expect(
          tree.filter((member) => alive.has(member)),
          `still running after ${signal} to npm`,
        ).toEqual([]);
        expect(await portFree(port), `port ${port} still taken`).toBe(true);
      },
      { timeout: 5000, interval: 100 },
    );
    // The tree being gone does not mean its last output was read: a flushed shutdown line can still be in the pipe.
    await closed;
    return stdout;
  } finally {
    for (const member of tree) {
      try {
        process.kill(member, 'SIGKILL');
      } catch {
        // gone, as it should be
      }
    }
  }
}

const SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

describe.skipIf(process.platform !== 'linux')('stopping npm stops what it runs', () => {
  it.concurrent.each(SIGNALS)('npm start, %s to npm alone', async (signal) => {
    await stopNpm(['start'], ROOT, signal);
  });

  // A terminal's Ctrl-C reaches both npm and the service, and npm forwards it: still one graceful shutdown.
  it.concurrent('npm start, Ctrl-C (SIGINT to the process group): one graceful shutdown', async () => {
    const stdout = await stopNpm(['start'], ROOT, 'SIGINT', true);
    expect(stdout).toContain('"msg":"shutdown complete"');
    expect(stdout).not.toContain('second signal');
  });

  it.concurrent.each(SIGNALS)('npm run dev, %s to npm alone', async (signal) => {
    await stopNpm(['run', 'dev'], scratch(), signal);
  });
});
