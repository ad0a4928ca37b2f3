// `npm run test:hostile` (`--only 3,5,8` for some classes, results then in bench/results/hostile.tmp/):
// every class of abusive client or broken environment the service has to survive, against the
// built service started as production starts it; exits 1 if any case did not get the expected answer.
import fs from 'node:fs';
import path from 'node:path';
import { LOAD_CORE, RESULTS, ROOT, SERVER_CORE, machineInfo, pinToLoadCore, snapshotService } from './lib.mjs';
import { writeBlock } from './markdown-block.mjs';
import { hangingCollector } from './hostile/environment-cases.mjs';
import { SNAPSHOT, WORK, runClass } from './hostile/harness.mjs';
import { pipeliningFlood, slowlorisAndIdle } from './hostile/http-cases.mjs';
import { provenByTests } from './hostile/tests.mjs';

// Left for the test suites, which assert the same: classes 1, 2 and 6 (request smuggling, HTTP
// edge cases, client drops) for test/hostile-http.test.ts; 7 (stuck stdout), 9 (forced sampling),
// 10 (bad configuration) and 11 (shutdown under load), for test/stdout, telemetry, config,
// otel-config and shutdown.test.ts. Classes 5, 12 and 13 are cases of the test suites too: the run
// reports them by running those tests (each case in one place). The others keep their numbers,
// which the docs and --only name.
const HOSTILE_HTTP = 'test/hostile-http.test.ts';
const CLASSES = [
  ['3. Pipelining flood', pipeliningFlood],
  ['4. Slowloris + idle', slowlorisAndIdle],
  ['5. Oversized bodies', provenByTests(HOSTILE_HTTP, ['Expect: 100-continue', 'a body over the limit from a client still sending it'])],
  ['8. Collector hanging', hangingCollector],
  ['12. Metrics port', provenByTests(HOSTILE_HTTP, ['the metrics port, attacked as the API port is'])],
  [
    '13. Connection budget',
    provenByTests('test/connection-budget.test.ts', ['connections past the cap', "the probe port (PROBE_PORT), which the chart's liveness probe calls"]),
  ],
];

const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');

function markdown(result) {
  const { meta, rows } = result;
  const m = meta.machine;
  const lines = [
    `Measured ${meta.date} on ${m.nproc} × ${m.cpu}, ${m.memGb} GiB, Linux ${m.kernel}, Node ${m.node} (${m.pinned}).`,
    `Command: \`${meta.command}\`; ${meta.seconds.toFixed(0)} s in all; ${result.passed} passed, ${result.failed} failed.`,
    '',
    '| class | what was sent | what came back | peak RSS MB | verdict |',
    '|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${cell(r.class)} | ${cell(r.sent)} | ${cell(r.got)} | ${Number.isFinite(r.rssMb) ? r.rssMb.toFixed(0) : '–'} | ${r.ok ? 'ok' : cell(`FAILED: ${r.failures.join('; ')}`)} |`,
    );
  }
  lines.push(
    '',
    'Peak RSS: VmRSS of the service process sampled every 100 ms from spawn to exit (per case where a case has its own process, else per class). ' +
      `Service defaults unless the row says otherwise (BODY_LIMIT 1mb, LOG_LEVEL info, stdout to a file); /health probes open a new connection every 100 ms, 2 s timeout each (the chart's readiness probe timeout). ` +
      'Details (raw answers, counts, RSS samples) are in hostile.json; service logs in hostile.tmp/.',
  );
  return lines.join('\n') + '\n';
}

async function main() {
  const only = (() => {
    const i = process.argv.indexOf('--only');
    return i > 0 ? new Set(process.argv[i + 1].split(',').map(Number)) : undefined;
  })();
  const started = new Date();
  const t0 = performance.now();
  // The harness (probes, samplers, raw clients) shares core 1 with the workers; core 0 is the service's.
  pinToLoadCore();
  const serviceDir = snapshotService(SNAPSHOT);
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  const rows = [];
  for (const [title, fn] of CLASSES) {
    if (only && !only.has(Number.parseInt(title))) continue;
    const classRows = await runClass(title, fn, serviceDir);
    for (const r of classRows) console.error(`${r.ok ? 'ok    ' : 'FAILED'} ${title}: ${r.sent} -> ${r.got}${r.ok ? '' : ` [${r.failures.join('; ')}]`}`);
    rows.push(...classRows);
  }
  const result = {
    meta: {
      date: started.toISOString(),
      machine: machineInfo(`service on core ${SERVER_CORE}; clients, workers and harness on core ${LOAD_CORE}`),
      command: `sh scripts/node.sh bench/hostile.mjs ${process.argv.slice(2).join(' ')}`.trim(),
      service: `dist/ and package.json copied to ${path.relative(ROOT, serviceDir)} at the start; started as \`node dist/main.js\``,
      seconds: (performance.now() - t0) / 1000,
    },
    passed: rows.filter((r) => r.ok).length,
    failed: rows.filter((r) => !r.ok).length,
    rows,
  };
  // A partial run (--only) must not replace the full results: it stays in the work directory.
  const outDir = only ? WORK : RESULTS;
  fs.writeFileSync(path.join(outDir, 'hostile.json'), JSON.stringify(result, null, 2) + '\n');
  const md = markdown(result);
  // A full run's table has one home, docs/reliability.md; a partial run's stays beside its JSON.
  if (only) fs.writeFileSync(path.join(WORK, 'hostile.md'), md);
  else writeBlock(path.join(ROOT, 'docs', 'reliability.md'), 'hostile', md);
  process.stdout.write('\n' + md);
  process.exitCode = result.failed === 0 ? 0 : 1;
}

await main();
