// `npm run test:hostile`: every class of abusive client the service has to survive, and what it
// gets. The cases are the tests of test/hostile-http.test.ts and test/connection-budget.test.ts,
// written once; this runs them (vitest's JSON reporter) and writes the table in docs/reliability.md,
// one row per describe block under its class. Exits 1 if a test failed or a class ran none.
// Bad days around the service (stuck stdout, bad configuration, shutdown under load, forced
// sampling) are proven by their own suites: docs/reliability.md names them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { RESULTS, ROOT, machineInfo } from './lib.mjs';
import { writeBlock } from './markdown-block.mjs';

const FILES = ['test/hostile-http.test.ts', 'test/connection-budget.test.ts'];
// Each class by the starts of its describe blocks' names.
const CLASSES = [
  ['1. Request smuggling', ['HTTP that Node lets through', 'NODE_OPTIONS=--insecure-http-parser', 'a malformed request pipelined', 'refusals in the log']],
  ['2. HTTP edge cases', ['a request answered before its body', 'request heads over']],
  ['3. Pipelining flood', ['pipelining']],
  ['4. Slowloris + idle', ['connections held open for free']],
  ['5. Oversized bodies', ['Expect: 100-continue', 'a body over the limit', 'a body cut into many chunks']],
  ['6. Client drops', ['a client that leaves', 'a request answered 408']],
  ['8. Collector hanging', ['a collector that never answers']],
  ['12. Metrics port', ['the metrics port, attacked']],
  ['13. Connection budget', ['connections past the cap', 'the probe port']],
];

const started = new Date();
const report = path.join(RESULTS, 'hostile.json');
fs.mkdirSync(RESULTS, { recursive: true });
const vitest = [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--project', 'service', '--project', 'process', ...FILES];
spawnSync(process.execPath, [...vitest, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`], { cwd: ROOT, stdio: 'inherit' });
const { testResults } = JSON.parse(fs.readFileSync(report, 'utf8'));

const blocks = new Map();
for (const suite of testResults) {
  for (const test of suite.assertionResults) {
    const key = `\`${path.relative(ROOT, suite.name)}\`: ${test.ancestorTitles[0]}`;
    const block = blocks.get(key) ?? { name: test.ancestorTitles[0], passed: 0, ran: 0, ms: 0, failures: [] };
    blocks.set(key, block);
    if (test.status !== 'passed' && test.status !== 'failed') continue;
    block.ran += 1;
    block.ms += test.duration ?? 0;
    if (test.status === 'passed') block.passed += 1;
    else block.failures.push(`${test.title}: ${test.failureMessages[0]?.split('\n')[0] ?? 'failed'}`);
  }
}
const classOf = (name) => CLASSES.find(([, starts]) => starts.some((start) => name.startsWith(start)))?.[0];
const rows = [...blocks].map(([key, b]) => ({ title: classOf(b.name) ?? '–', key, ...b }));
// A renamed block or a new one must not leave the table quietly.
for (const row of rows) if (row.title === '–') row.failures.push('in no class of bench/hostile.mjs');
for (const [title] of CLASSES)
  if (!rows.some((row) => row.title === title && row.ran > 0)) rows.push({ title, key: '–', ran: 0, passed: 0, ms: 0, failures: ['no test ran'] });
rows.sort((a, b) => Number.parseInt(a.title) - Number.parseInt(b.title));
const failed = rows.filter((row) => row.failures.length > 0 || row.ran === 0).length;

const m = machineInfo();
const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
const md = [
  `Measured ${started.toISOString()} on ${m.nproc} × ${m.cpu}, ${m.memGb} GiB, Linux ${m.kernel}, Node ${m.node}.`,
  `Command: \`npm run test:hostile\`; ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s in all; ${rows.length - failed} blocks passed, ${failed} failed.`,
  '',
  '| class | tests (file: describe block, where each test says what is sent and what comes back) | passed | verdict |',
  '|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| ${r.title} | ${cell(r.key)} | ${r.passed}/${r.ran} in ${(r.ms / 1000).toFixed(1)} s | ${r.failures.length ? cell(`FAILED: ${r.failures.join('; ')}`) : 'ok'} |`,
  ),
].join('\n');
writeBlock(path.join(ROOT, 'docs', 'reliability.md'), 'hostile', md);
process.stdout.write(`\n${md}\n`);
process.exitCode = failed === 0 ? 0 : 1;
