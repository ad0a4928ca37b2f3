// Runs: dist/main.js (`npm run build` first; `npm test` does it) on the machine's own `node` when
// that is older than the service supports (Debian bookworm's Node 20); skipped where it is not.
//
// `node dist/main.js` on an old Node says what it needs, as the npm scripts do, instead of failing
// with a TypeError on the first API that Node lacks.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { expect, it } from 'vitest';
import { MAIN } from './support/paths';

const pathNode = spawnSync('node', ['--version'], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
const [major = 0, minor = 0] = pathNode.stdout.trim().slice(1).split('.').map(Number);
const oldNode = pathNode.status === 0 && (major < 22 || (major === 22 && minor < 15));

it.skipIf(!oldNode)(`node dist/main.js on ${pathNode.stdout.trim()} says it needs Node >= 22.15, and exits 1`, () => {
  expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
  const run = spawnSync('node', [MAIN], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', PORT: '0', METRICS_PORT: '0' }, timeout: 10_000 });
  expect(run.stderr).toBe(`product-service needs Node >= 22.15 (found: ${pathNode.stdout.trim()}).\n`);
  expect(run.status).toBe(1);
});
