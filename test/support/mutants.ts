// Under `npm run test:mutation`, the service a test spawns is Stryker's instrumented build (its
// sandbox's dist/), and that process knows nothing of the test's: Stryker's mutant schemata turn
// a mutant on in a child when __STRYKER_ACTIVE_MUTANT__ names it, and the child counts the mutants
// it reaches in its own globalThis.__stryker__. So the child gets the active mutant in its
// environment, and in the dry run its coverage is read back (mutant-coverage.cjs) and reported as
// the coverage of each test that ran while it lived, which is what makes Stryker run those tests
// against those mutants. Outside Stryker nothing here does anything.
import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeAll, beforeEach } from 'vitest';

type Hits = Record<string, number>;
interface Namespace {
  activeMutant?: string;
  currentTestId?: string;
  mutantCoverage?: { static: Hits; perTest: Partial<Record<string, Hits>> };
}

/** Created by Stryker's vitest setup file before any test file loads; undefined outside Stryker. */
const stryker = (globalThis as { __stryker__?: Namespace }).__stryker__;
const PRELOAD = join(__dirname, 'mutant-coverage.cjs');
const children = new Map<ChildProcess, string>();
let testId: string | undefined;
let spawned = 0;

if (stryker !== undefined) {
  // What a file's beforeAll hooks reach (a service built once for its suites) Stryker counts as
  // reached by no test: a static mutant, ignored. It is reached by each test of the file that uses
  // that service, so each test is given it; the mutant is then run with those tests, the service
  // built anew with it on. (This module is a setup file of the mutation run: its beforeAll runs
  // before the file's own.)
  let beforeFile: Hits = {};
  beforeAll(() => {
    beforeFile = { ...stryker.mutantCoverage?.static };
  });
  // Stryker's setup file sets the id in its own beforeEach, which runs before this one.
  beforeEach(() => {
    testId = stryker.currentTestId;
    const coverage = stryker.mutantCoverage;
    if (coverage === undefined || testId === undefined) return;
    const hits = (coverage.perTest[testId] ??= {});
    for (const [id, count] of Object.entries(coverage.static)) if (count > (beforeFile[id] ?? 0)) hits[id] = (hits[id] ?? 0) + count - (beforeFile[id] ?? 0);
  });
  afterEach(async () => {
    for (const [child, file] of children) await reportCoverage(child, file);
  });
}

/** What spawning the built service adds to its command line and environment. */
export function mutantSpawnOptions(): { args: string[]; env: Record<string, string>; track: (child: ChildProcess) => void } {
  const none = { args: [], env: {}, track: () => undefined };
  if (stryker === undefined) return none;
  if (stryker.activeMutant !== undefined) return { ...none, env: { __STRYKER_ACTIVE_MUTANT__: stryker.activeMutant } };
  spawned += 1;
  const file = join(tmpdir(), `stryker-child-coverage-${process.pid}-${spawned}.json`);
  return {
    args: ['--require', PRELOAD],
    env: { STRYKER_CHILD_COVERAGE_FILE: file },
    track(child) {
      children.set(child, file);
      child.once('exit', () => {
        children.delete(child);
        mergeCoverage(file);
        rmSync(file, { force: true });
      });
    },
  };
}

/** Waits for the child's next write after now (it writes every 50 ms), so that what the test made it run is in. */
async function reportCoverage(child: ChildProcess, file: string): Promise<void> {
  const before = readCoverage(file)?.written ?? 0;
  for (let waited = 0; waited < 1000 && child.exitCode === null && child.signalCode === null; waited += 20) {
    if ((readCoverage(file)?.written ?? 0) >= before + 2) break;
    await sleep(20);
  }
  mergeCoverage(file);
}

function readCoverage(file: string): { written: number; coverage?: Namespace['mutantCoverage'] } | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as { written: number; coverage?: Namespace['mutantCoverage'] };
  } catch {
    return undefined; // not written yet
  }
}

function mergeCoverage(file: string): void {
  const child = readCoverage(file)?.coverage;
  if (stryker === undefined || testId === undefined || child === undefined) return;
  stryker.mutantCoverage ??= { static: {}, perTest: {} };
  const hits = (stryker.mutantCoverage.perTest[testId] ??= {});
  // The child has no test ids: all it reached is in its static part. Counts are the child's totals so far.
  for (const [id, count] of [child.static, ...Object.values(child.perTest)].flatMap((part) => Object.entries(part ?? {})))
    hits[id] = Math.max(hits[id] ?? 0, count);
}
