// The Docker machinery shared by the container tests and the chart tests (test/chart/docker-run.test.ts):
// the client, the engine check, and HOST_NAME, by which a container reaches a server of the test process on
// the bridge's host address (reachable from containers, not from outside), as a pod reaches a collector.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Debian's docker.io client, the engine's own version: it drives the engine's BuildKit (the /usr/local/bin/docker 28.x one cannot). */
export const DOCKER = '/usr/bin/docker';

/** Fails, never skips, when the client or the engine is missing, and says how to get them. */
export function requireDockerEngine(): void {
  if (!existsSync(DOCKER)) throw new Error(`${DOCKER} (Debian's docker.io) is missing. Run: bash scripts/ci/docker-engine.sh`);
  if (spawnSync(DOCKER, ['info'], { encoding: 'utf8' }).status !== 0) throw new Error('No Docker engine answers. Run: bash scripts/ci/docker-engine.sh');
}

/** Runs the client (BuildKit on, for builds); a failure throws with its stderr unless allowed. */
export function docker(args: string[], allowFailure = false): SpawnSyncReturns<string> {
  const run = spawnSync(DOCKER, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, env: { ...process.env, DOCKER_BUILDKIT: '1' } });
  if (run.error) throw run.error;
  if (!allowFailure && run.status !== 0) throw new Error(`docker ${args.join(' ')} failed (${run.status}): ${run.stderr}`);
  return run;
}

export const HOST_NAME = 'host.docker.internal';

export const ADD_HOST_ARGS: readonly string[] = ['--add-host', `${HOST_NAME}:host-gateway`];

/** What host-gateway resolves to; asked of ip, as os.networkInterfaces() omits docker0 while no container is attached. */
export function bridgeAddress(): string {
  const ip = spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', 'docker0'], { encoding: 'utf8' });
  const address = /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(ip.stdout)?.[1];
  if (address === undefined) throw new Error(`No IPv4 address on docker0 (is dockerd running with its default bridge?): ${ip.stderr}`);
  return address;
}
