// Runs: the real .ci/run under bash, in a scratch directory whose tools are stand-ins (the real
// steps take half an hour): npm's format check fails, one test project reports a failure.
//
// A failing step must not hide the others: every step runs, and the run fails at the end with a
// summary of the steps and the test totals.
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ROOT } from './support/paths';

const scratch = mkdtempSync(join(tmpdir(), 'product-service-ci-run-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function write(file: string, text: string): void {
  mkdirSync(join(scratch, file, '..'), { recursive: true });
  writeFileSync(join(scratch, file), text);
  chmodSync(join(scratch, file), 0o755);
}

/** A vitest run's JSON report, written where .ci/run asks for it. */
const REPORT = `out=$(echo "$*" | sed -n 's/.*--outputFile.json=\\([^ ]*\\).*/\\1/p')
failed=0; case "$*" in *"--project deploy"*) failed=1;; esac
[ -n "$out" ] && echo "{\\"numPassedTests\\":2,\\"numFailedTests\\":$failed,\\"numPendingTests\\":0,\\"numTodoTests\\":0}" > "$out"
exit $failed
`;

it('runs every step after one fails, then fails with a summary of the steps and the test totals', () => {
  cpSync(join(ROOT, '.ci', 'run'), join(scratch, '.ci', 'run'));
  write('bin/npm', `#!/bin/sh\ncase "$*" in *format:check*) exit 1;; esac\n${REPORT}`);
  write('scripts/node.sh', `case "$*" in *vitest*) ;; *) exec "${process.execPath}" "$@";; esac\n${REPORT}`);
  for (const script of [
    'docker-engine',
    'install-helm',
    'install-prometheus',
    'install-docker-compose',
    'install-registry-tools',
    'actionlint',
    'base-images',
    'chart-check',
  ])
    write(`scripts/ci/${script}.sh`, 'exit 0\n');
  write('bench/install-tools.sh', 'exit 0\n');

  const run = spawnSync('bash', [join(scratch, '.ci', 'run')], {
    cwd: scratch,
    env: { PATH: `${join(scratch, 'bin')}:${process.env.PATH ?? ''}` },
    encoding: 'utf8',
  });
  expect(run.status, run.stdout + run.stderr).toBe(1);
  const summary = run.stdout.slice(run.stdout.indexOf('==== summary ===='));
  expect(summary).toMatch(/^FAILED .* format .*$/m);
  expect(summary).toMatch(/^FAILED .* deploy\/: .*$/m);
  // Every step after the format check ran: lint, the tests, mutation testing, the tools, the chart, the benchmark.
  expect(summary.match(/^ok /gm)).toHaveLength(11);
  expect(summary).toContain('tests: 10 passed, 1 failed, 0 skipped');
});
