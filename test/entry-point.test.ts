// Runs: dist/main.js (`npm run build` first; `npm test` does it) on the machine's own `node` when
// that is older than the service supports (Debian bookworm's Node 20); skipped where it is not.
//
// `node dist/main.js` on an old Node says what it needs, as the npm scripts do, instead of failing
// with a TypeError on the first API that Node lacks.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { expect, it } from 'vitest';
import { MAIN } from './support/paths';

/** The machine's own `node`: the first on PATH outside node_modules (npm puts the bundled Node 24 first). */
const machineNode = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => !dir.includes('node_modules'))
  .map((dir) => join(dir, 'node'))
  .find((file) => existsSync(file));
const version = machineNode === undefined ? '' : spawnSync(machineNode, ['--version'], { encoding: 'utf8' }).stdout.trim();
const [major = 0, minor = 0] = version.slice(1).split('.').map(Number);
const oldNode = version !== '' && (major < 22 || (major === 22 && minor < 15));

it.skipIf(!oldNode)(`node dist/main.js on the machine's Node (${version}) says it needs Node >= 22.15, and exits 1`, () => {
  expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
  const run = spawnSync(machineNode ?? 'node', [MAIN], { encoding: 'utf8', env: { PORT: '0', METRICS_PORT: '0' }, timeout: 10_000 });
  expect(run.stderr).toBe(`product-service needs Node >= 22.15 (found: ${version}).\n`);
  expect(run.status).toBe(1);
});
