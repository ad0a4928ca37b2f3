// A real Alertmanager (Debian's prometheus-alertmanager, installed by scripts/ci/apt-install.sh)
// on a free loopback port, with a configuration that `amtool check-config` accepts first.
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from '../support/paths';
import { PROMETHEUS_INSTALL, requireTool, run, startDaemon, type Daemon } from './tools';

/** The shipped configuration: its inhibit_rules are the part users copy. */
export const ALERTMANAGER_CONFIG = join(ROOT, 'deploy', 'alertmanager', 'alertmanager.yml');

export async function startAlertmanager(dir: string, config: string): Promise<Daemon> {
  const check = run(requireTool('amtool', PROMETHEUS_INSTALL), ['check-config', config]);
  expect(check.status, check.stdout + check.stderr).toBe(0);
  return startDaemon(
    requireTool('prometheus-alertmanager', PROMETHEUS_INSTALL),
    (address) => [`--config.file=${config}`, `--storage.path=${dir}`, `--web.listen-address=${address}`, '--cluster.listen-address=', '--log.level=warn'],
    '/-/ready',
  );
}
