// A real Alertmanager (Debian's prometheus-alertmanager, installed by scripts/ci/install-prometheus.sh)
// on a free loopback port, with a configuration that `amtool check-config` accepts first.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { expect, vi } from 'vitest';
import { ROOT } from '../support/paths';
import { freePort } from '../support/service-process';
import { PROMETHEUS_INSTALL, requireTool, run } from './tools';

/** The shipped configuration: its inhibit_rules are the part users copy. */
export const ALERTMANAGER_CONFIG = join(ROOT, 'deploy', 'alertmanager', 'alertmanager.yml');

export interface Alertmanager {
  readonly url: string;
  stop(): Promise<void>;
}

export async function startAlertmanager(dir: string, config: string): Promise<Alertmanager> {
  const alertmanager = requireTool('prometheus-alertmanager', PROMETHEUS_INSTALL);
  const check = run(requireTool('amtool', PROMETHEUS_INSTALL), ['check-config', config]);
  expect(check.status, check.stdout + check.stderr).toBe(0);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    alertmanager,
    [`--config.file=${config}`, `--storage.path=${dir}`, `--web.listen-address=127.0.0.1:${port}`, '--cluster.listen-address=', '--log.level=warn'],
    { stdio: 'ignore' },
  );
  await vi.waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`alertmanager exited with ${child.exitCode}`);
      expect((await fetch(`${url}/-/ready`)).status).toBe(200);
    },
    { timeout: 20_000, interval: 200 },
  );
  return {
    url,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
