// A Stryker reporter (stryker.config.mjs): writes the run's score and per-file table into
// docs/development.md, between the markers below, once a run over every file of src/ has finished.
// By hand because Stryker's own reporters print the table or write HTML/JSON, never into a document.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { declareClassPlugin, PluginKind } from '@stryker-mutator/api/plugin';

const DOC = 'docs/development.md';
const START = '<!-- mutation-score:start -->';
const END = '<!-- mutation-score:end -->';

const percent = (score) => (Number.isNaN(score) ? 'n/a' : `${score.toFixed(1)} %`);

/** Every file of the metrics tree, with its path from the tree's root. */
function filesOf(result, prefix = '') {
  if (result.file !== undefined) return [{ path: `${prefix}${result.name}`, metrics: result.metrics }];
  return result.childResults.flatMap((child) => filesOf(child, prefix === '' && result.name === 'All files' ? '' : `${prefix}${result.name}/`));
}

class MutationScoreReporter {
  onMutationTestReportReady(_report, metrics) {
    const seconds = Math.round(process.uptime());
    const files = filesOf(metrics.systemUnderTestMetrics).sort((a, b) => a.path.localeCompare(b.path));
    const inSrc = readdirSync('src', { recursive: true }).filter((name) => String(name).endsWith('.ts')).length;
    // A run over part of src/ (`--mutate`, CI's small run) leaves the table of the last whole run.
    if (files.length < inSrc) return;
    const row = (name, m) =>
      `| ${name} | ${percent(m.mutationScore)} | ${percent(m.mutationScoreBasedOnCoveredCode)} | ${m.killed + m.timeout} | ${m.survived} | ${m.noCoverage} | ${m.ignored} |`;
    const all = metrics.systemUnderTestMetrics.metrics;
    const table = [
      `Last whole run: \`npx stryker ${process.argv.slice(2).join(' ')}\` (\`npm run test:mutation\`), ${new Date().toISOString().slice(0, 10)},`,
      `${Math.floor(seconds / 60)} min ${seconds % 60} s on ${cpus().length} cores, Node ${process.version}. Score: ${percent(all.mutationScore)} of all valid`,
      `mutants, ${percent(all.mutationScoreBasedOnCoveredCode)} of those some test of the \`service\` project runs.`,
      '',
      '| File | Score | Of covered | Killed (or timed out) | Survived | No coverage | Ignored (static or disabled) |',
      '| ---- | ----: | ---------: | ---: | ---: | ---: | ---: |',
      ...files.map(({ path, metrics: m }) => row(`\`src/${path}\``, m)),
      row('**all**', all),
    ].join('\n');
    const doc = readFileSync(DOC, 'utf8');
    const start = doc.indexOf(START);
    const end = doc.indexOf(END);
    if (start < 0 || end < start) throw new Error(`${DOC} lacks the markers ${START} and ${END}`);
    writeFileSync(DOC, `${doc.slice(0, start + START.length)}\n\n${table}\n\n${doc.slice(end)}`);
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, 'mutation-score', MutationScoreReporter)];
