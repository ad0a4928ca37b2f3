// Runs: `npm start` (the README's way to run the service), with its build step skipped
// (--ignore-scripts skips prestart only): `npm test` builds dist/ first.
//
// A developer's or a VM's service must not open the V8 inspector when something signals it: SIGUSR1
// would otherwise make Node listen on 127.0.0.1:9229, where any local process could run code in it.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ROOT } from './support/paths';
import { descendants } from './support/processes';
import { freePorts } from './support/service-process';

describe('npm start', () => {
  let stop = (): void => undefined;
  afterAll(() => stop());

  it('SIGUSR1 to the service opens no inspector, and the service keeps serving', async () => {
    const [apiPort, scrapePort] = (await freePorts(2)) as [number, number];
    const npm = spawn('npm', ['start', '--ignore-scripts', '--silent'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        HOST: '127.0.0.1',
        PORT: String(apiPort),
        METRICS_PORT: String(scrapePort),
        OTEL_SDK_DISABLED: 'true',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    stop = () => process.kill(-(npm.pid as number), 'SIGKILL');
    let stderr = '';
    npm.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const health = `http://127.0.0.1:${apiPort}/health`;
    await vi.waitFor(async () => expect((await fetch(health)).status).toBe(200), { timeout: 20_000, interval: 200 });

    const service = descendants(npm.pid as number).find((p) => p.cmdline.includes('dist/main.js') && !p.cmdline.startsWith('sh '));
    expect(service, 'the Node process that npm start runs').toBeDefined();
    process.kill((service as { pid: number }).pid, 'SIGUSR1');
    await sleep(1000);

    // Node says "Debugger listening on ..." when the inspector opens, "Starting inspector ... failed" when
    // it cannot: its stderr answers without connecting to the inspector's fixed port, 9229.
    expect(stderr).not.toMatch(/Debugger listening|inspector/i);
    expect((await fetch(health)).status).toBe(200);
  });
});
