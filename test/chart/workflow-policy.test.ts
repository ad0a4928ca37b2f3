// Runs: scripts/ci/workflow-policy.mjs (rule 7: publishing and signing jobs run in an environment)
// on a scratch copy of .github whose workflows the test changes, and on the repository's own.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/paths';

const scratch = mkdtempSync(join(tmpdir(), 'workflow-policy-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The policy's verdict on the repository's .github with `edit` applied to each workflow's text. */
function policyOn(edit: (name: string, text: string) => string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(scratch, 'repo-'));
  cpSync(join(ROOT, '.github'), join(dir, '.github'), { recursive: true });
  mkdirSync(join(dir, 'scripts', 'ci'), { recursive: true });
  cpSync(join(ROOT, 'scripts/ci/workflow-policy.mjs'), join(dir, 'scripts/ci/workflow-policy.mjs'));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  for (const name of ['image.yml', 'release.yml']) {
    const file = join(dir, '.github/workflows', name);
    writeFileSync(file, edit(name, readFileSync(file, 'utf8')));
  }
  const run = spawnSync(process.execPath, [join(dir, 'scripts/ci/workflow-policy.mjs')], { encoding: 'utf8' });
  return { status: run.status, output: run.stdout + run.stderr };
}

describe('workflow policy: publishing and signing only inside an environment', () => {
  it("passes the repository's workflows", () => {
    expect(policyOn((_, text) => text)).toMatchObject({ status: 0 });
  });

  it('fails, naming the job, when a job with packages or id-token write has no environment (a tag from a side branch could drop it)', () => {
    const { status, output } = policyOn((_, text) => text.replace(/^ {4}environment: .*\n/gm, ''));
    expect(status).toBe(1);
    expect(output).toContain('image.yml: job publish: packages, id-token write outside an environment');
    expect(output).toContain('release.yml: job chart: packages, id-token write outside an environment');
  });

  it('counts contents: write and write-all too', () => {
    const { status, output } = policyOn((name, text) =>
      name === 'release.yml'
        ? text.replace(
            '  chart-checks:\n    name: Chart checks\n',
            '  tag:\n    runs-on: ubuntu-24.04\n    permissions: write-all\n    steps:\n      - run: "true"\n  notes:\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: write\n    steps:\n      - run: "true"\n  chart-checks:\n    name: Chart checks\n',
          )
        : text,
    );
    expect(status).toBe(1);
    expect(output).toContain('job tag: write-all write outside an environment');
    expect(output).toContain('job notes: contents write outside an environment');
  });
});
