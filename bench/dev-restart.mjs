// How long `npm run dev` takes from a saved change under src/ to the service answering with it.
//
//   sh scripts/node.sh bench/dev-restart.mjs [--rounds 10]
//
// Runs scripts/dev.mjs in a scratch copy of src/, never the working tree's files. Asserts nothing:
// timings are information, the machine is shared.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { cleanEnv, freePorts, machineInfo, max, median, min, ROOT } from './lib.mjs';

const { values: args } = parseArgs({ options: { rounds: { type: 'string' } } });
const rounds = Number(args.rounds ?? 10);

// What scripts/dev.mjs reads, in a temporary directory: the rounds change its sources there.
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'product-service-dev-'));
for (const entry of ['src', 'scripts', 'package.json', 'tsconfig.json']) fs.cpSync(path.join(ROOT, entry), path.join(scratch, entry), { recursive: true });
fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(scratch, 'node_modules'));
const routes = path.join(scratch, 'src', 'http', 'routes.ts');
const original = fs.readFileSync(routes, 'utf8');
const HEALTH_BODY = "ctx.body = 'ok';";
if (!original.includes(HEALTH_BODY)) throw new Error(`src/http/routes.ts no longer holds ${HEALTH_BODY}: update bench/dev-restart.mjs`);

const [port, metricsPort] = await freePorts(2);
const dev = spawn(process.execPath, [path.join(scratch, 'scripts', 'dev.mjs')], {
  cwd: scratch,
  env: { ...cleanEnv(), PORT: String(port), METRICS_PORT: String(metricsPort), HOST: '127.0.0.1' },
  stdio: ['ignore', 'ignore', 'inherit'],
});

const health = () =>
  fetch(`http://127.0.0.1:${port}/health`).then(
    (response) => response.text(),
    () => undefined,
  );

async function waitForBody(body, timeoutMs = 20_000) {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if ((await health()) === body) return;
    await sleep(5);
  }
  throw new Error(`GET /health did not answer ${JSON.stringify(body)} within ${timeoutMs} ms`);
}

const samples = [];
try {
  await waitForBody('ok');
  for (let round = 1; round <= rounds; round++) {
    await sleep(1000);
    const body = `ok ${round}`;
    const startedAt = performance.now();
    fs.writeFileSync(routes, original.replace(HEALTH_BODY, `ctx.body = '${body}';`));
    await waitForBody(body);
    samples.push(performance.now() - startedAt);
    console.error(`round ${round}: ${Math.round(performance.now() - startedAt)} ms`);
  }
} finally {
  dev.kill('SIGINT');
  await new Promise((resolve) => dev.once('close', resolve));
  fs.rmSync(scratch, { recursive: true, force: true });
}
const machine = machineInfo('not pinned');
console.log(
  `npm run dev, save → new answer, ${samples.length} rounds, ${machine.nproc} × ${machine.cpu}, Node ${machine.node}: ` +
    `median ${Math.round(median(samples))} ms, min ${Math.round(min(samples))} ms, max ${Math.round(max(samples))} ms`,
);
