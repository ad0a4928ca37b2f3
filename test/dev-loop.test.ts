// Runs: scripts/dev.mjs (`npm run dev`), in a scratch copy of src/ and scripts/ whose sources the
// test changes; it builds its own dist-dev/, so no build is needed.
//
// The development loop as a developer meets it, from `npm run dev` to Ctrl-C.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { scratchCopy } from './support/processes';
import { exitWithin, freePorts } from './support/service-process';

const scratch = scratchCopy('product-service-dev-test-');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('npm run dev', () => {
  it('serves with pretty log lines, keeps serving through a build error, restarts on a change, opens the debugger, and exits 0 on Ctrl-C', async () => {
    const [port, metricsPort] = (await freePorts(2)) as [number, number];
    const dev = spawn(process.execPath, [join(scratch, 'scripts', 'dev.mjs'), '--inspect=127.0.0.1:0'], {
      cwd: scratch,
      env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    dev.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    dev.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | string>((resolve) => dev.once('close', (code, signal) => resolve(code ?? signal ?? 'unknown')));
    const health = (): Promise<string | undefined> =>
      fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.text(),
        () => undefined,
      );
    try {
      await vi.waitFor(async () => expect(await health()).toBe('ok'), { timeout: 20_000, interval: 50 });
      expect((await fetch(`http://127.0.0.1:${port}/product`, { method: 'POST' })).status).toBe(201);
      await vi.waitFor(() => expect(stdout).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: request completed .*"status":201/m), { timeout: 5000 });
      expect(stdout).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: product-service listening /m);
      // pino-pretty, not JSON: no line of the service's reaches the terminal as an object.
      expect(stdout.split('\n').filter((line) => line.startsWith('{'))).toEqual([]);
      expect(stderr).toMatch(/Debugger listening on ws:\/\/127\.0\.0\.1:\d+\//);

      // A change that does not build is reported, and the last good build keeps serving.
      const routes = join(scratch, 'src', 'http', 'routes.ts');
      const source = readFileSync(routes, 'utf8');
      writeFileSync(routes, `${source}\nconst broken = ;\n`);
      await vi.waitFor(() => expect(stderr).toMatch(/ERROR.*\n[\s\S]*src\/http\/routes\.ts/), { timeout: 10_000 });
      expect(await health()).toBe('ok');

      writeFileSync(routes, source.replace("ctx.body = 'ok';", "ctx.body = 'ok, changed';"));
      await vi.waitFor(async () => expect(await health()).toBe('ok, changed'), { timeout: 20_000, interval: 50 });
      expect(stdout).toContain('INFO: shutdown complete');
    } finally {
      dev.kill('SIGINT');
    }
    expect(await exitWithin(exited, 15_000)).toBe(0);
    // The service went with it.
    expect(await health()).toBeUndefined();
    expect(stdout.match(/INFO: shutdown complete/g)).toHaveLength(2);
  });
});
