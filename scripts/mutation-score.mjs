// A Stryker reporter (stryker.config.mjs): writes the per-file table of mutation scores into
// docs/development.md, between the markers below. A run updates the rows of the files it mutated
// whole (a line range, as CI's smoke, updates none) and keeps the others, each row saying which
// run measured it; the total is the sum of the rows. By hand because Stryker's own reporters print
// the table or write HTML/JSON, never into a document.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { commonTokens, declareClassPlugin, PluginKind } from '@stryker-mutator/api/plugin';

const DOC = 'docs/development.md';
const START = '<!-- mutation-score:start -->';
const END = '<!-- mutation-score:end -->';
const HEADER = [
  '| File | Score | Of covered | Killed (or timed out) | Survived | No coverage | Ignored (static or disabled) | Measured by the run of |',
  '| ---- | ----: | ---------: | ---: | ---: | ---: | ---: | ---- |',
];

const percent = (part, whole) => (whole === 0 ? 'n/a' : `${((100 * part) / whole).toFixed(1)} %`);
const cells = ({ killed, survived, noCoverage, ignored }) => [
  percent(killed, killed + survived + noCoverage),
  percent(killed, killed + survived),
  killed,
  survived,
  noCoverage,
  ignored,
];

/**
 * Every file of the report, its path from src/, and its counts. From the report's own paths: the
 * metrics tree names its files from their common directory, so a run of one file names it alone.
 */
function filesOf(report) {
  return Object.entries(report.files).map(([path, { mutants }]) => {
    const count = (status) => mutants.filter((mutant) => mutant.status === status).length;
    const metrics = {
      killed: count('Killed'),
      timeout: count('Timeout'),
      survived: count('Survived'),
      noCoverage: count('NoCoverage'),
      ignored: count('Ignored'),
    };
    return { path: path.replace(/^src\//, ''), metrics };
  });
}

/** The rows already in the document: file -> its cells after the file's name. */
function rowsIn(block) {
  const rows = new Map();
  for (const match of block.matchAll(/^\| `src\/([^`]+)` \| (.*) \|$/gm)) if (!match[2].startsWith('not run')) rows.set(match[1], match[2].split(' | '));
  return rows;
}

class MutationScoreReporter {
  static inject = [commonTokens.options];
  constructor(options) {
    this.options = options;
    // The commit the sandbox was copied from, read at the start (the run can last hours): a row is the
    // file's score until the file or its tests change after it.
    this.commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  }

  onMutationTestReportReady(report) {
    const seconds = Math.round(process.uptime());
    // Only the files this run mutated (the report also holds those the incremental file kept), and
    // whole: `--mutate src/x.ts:10-20` mutates part of a file, its row would not be the file's score.
    const whole = (path) => this.options.mutate.some((pattern) => pattern === `src/${path}` || pattern.includes('*'));
    const files = filesOf(report).filter(({ path }) => whole(path));
    if (files.length === 0) return;
    const tested = files.reduce((sum, { metrics: m }) => sum + m.killed + m.timeout + m.survived, 0);
    // `--testFiles`: the score against those files only, said in each row it measured.
    const against = this.options.testFiles?.length ? `, against ${this.options.testFiles.join(' ')} only` : '';
    const run = `${new Date().toISOString().slice(0, 10)} at ${this.commit}, ${Math.round(seconds / 60)} min (${tested} mutants tested, ${tested === 0 ? 'n/a' : Math.round(seconds / tested)} s per mutant, the initial test run included)${against}`;

    const doc = readFileSync(DOC, 'utf8');
    const start = doc.indexOf(START);
    const end = doc.indexOf(END);
    if (start < 0 || end < start) throw new Error(`${DOC} lacks the markers ${START} and ${END}`);
    const rows = rowsIn(doc.slice(start, end));
    for (const { path, metrics: m } of files) rows.set(path, [...cells({ ...m, killed: m.killed + m.timeout }), run].map(String));
    const inSrc = readdirSync('src', { recursive: true }).filter((name) => String(name).endsWith('.ts'));
    const sorted = inSrc.map((name) => String(name)).sort((a, b) => a.localeCompare(b));
    const measured = sorted.filter((path) => rows.has(path));
    const sum = (index) => measured.reduce((total, path) => total + Number(rows.get(path)[index]), 0);
    const all = { killed: sum(2), survived: sum(3), noCoverage: sum(4), ignored: sum(5) };
    const table = [
      `Last run: \`npx stryker ${process.argv.slice(2).join(' ')}\` (\`npm run test:mutation\`), ${run}, on ${cpus().length} cores,`,
      `Node ${process.version}. ${measured.length} of ${sorted.length} files of \`src/\` measured.`,
      '',
      ...HEADER,
      ...sorted.map((path) => `| \`src/${path}\` | ${(rows.get(path) ?? ['not run', '', '', '', '', '', '']).join(' | ')} |`),
      `| **all measured** | ${cells(all).join(' | ')} | |`,
    ].join('\n');
    writeFileSync(DOC, `${doc.slice(0, start + START.length)}\n\n${table}\n\n${doc.slice(end)}`);
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, 'mutation-score', MutationScoreReporter)];
