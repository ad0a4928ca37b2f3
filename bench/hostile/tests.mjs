// A hostile class whose cases live in the test suites: the run reports it by running those tests
// (vitest's JSON reporter), one row per test, so each case is written once and the table still
// shows every class.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { NODE, ROOT } from '../lib.mjs';
import { WORK } from './harness.mjs';

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The tests of `file` under the `describes` blocks, as a class of the hostile run. */
export const provenByTests = (file, describes) => async () => {
  const out = path.join(WORK, `${path.basename(file, '.test.ts')}-${describes.length}.json`);
  const vitest = [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--project', 'service', '--project', 'process', file];
  const filter = ['-t', `^(?:${describes.map(escape).join('|')}) `, '--reporter=json', `--outputFile=${out}`];
  // A failing test exits 1; the report says which, so the exit code is not the verdict.
  await promisify(execFile)(NODE, [...vitest, ...filter], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 }).catch(() => {});
  const report = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, 'utf8')) : { testResults: [] };
  const rows = report.testResults
    .flatMap((suite) => suite.assertionResults)
    .filter((test) => test.status === 'passed' || test.status === 'failed')
    .map((test) => ({
      sent: `\`${file}\`: ${[...test.ancestorTitles, test.title].join(' › ')}`,
      got: `${test.status} in ${(test.duration / 1000).toFixed(1)} s`,
      failures: test.status === 'passed' ? [] : [test.failureMessages[0]?.split('\n')[0] ?? 'failed'],
    }));
  // A renamed describe block must not make a class vanish from the table.
  for (const name of describes) {
    if (!rows.some((row) => row.sent.startsWith(`\`${file}\`: ${name} › `)))
      rows.push({ sent: `\`${file}\`: ${name}`, got: 'no test ran', failures: ['no test of this block ran'] });
  }
  return rows;
};
