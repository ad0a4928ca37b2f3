// The benchmark harness of product-service (`npm run bench`): the options and the order of the
// run. Method and options: bench/README.md. Configurations are interleaved (A B C D A B C D ...)
// over the rounds because the machine is shared and noisy: only numbers measured in the same run
// are compared.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { measureClosed, measureRate, startupOnly } from './measure.mjs';
import {
  AGAINST,
  LOAD_CORE,
  RESULTS,
  ROOT,
  SERVER_CORE,
  SERVICE_NODE_ARGS,
  configurations,
  logDir,
  machineInfo,
  pinToLoadCore,
  snapshotService,
  startSink,
  endRun,
  note,
  problems,
} from './lib.mjs';
import { writeBlock } from './markdown-block.mjs';
import { f, markdown } from './render.mjs';
import { goals, summarise } from './summary.mjs';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string' },
    duration: { type: 'string' }, // seconds of measured load per configuration and round
    configs: { type: 'string' },
    'rate-mode': { type: 'boolean' },
    rate: { type: 'string' }, // fixed rates in req/s, comma-separated
    'rate-rounds': { type: 'string' }, // rounds of the fixed-rate phase (default: --rounds)
    startup: { type: 'string' }, // extra start-up-only samples per configuration
    against: { type: 'string' }, // another build (dist/ + package.json) to run beside this one
    'against-env': { type: 'string' }, // variables for the @against configurations only, e.g. the old defaults
    'against-args': { type: 'string' }, // Node flags for the @against configurations instead of the image's (`''`: none)
    smoke: { type: 'boolean' },
  },
});

const smoke = Boolean(args.smoke);
if ((args['against-env'] || args['against-args'] !== undefined) && !args.against) throw new Error('--against-env and --against-args need --against DIR');

function envPairs(text = '') {
  return Object.fromEntries(
    text
      .split(' ')
      .filter(Boolean)
      .map((pair) => {
        const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(pair);
        if (!match) throw new Error(`--against-env takes NAME=value pairs separated by spaces, not ${JSON.stringify(pair)}`);
        return [match[1], match[2]];
      }),
  );
}
/** The configurations that run the service's build (and so can be compared with --against). */
const SERVICE_CONFIGS = ['service-off', 'service-full'];
const configs = (args.configs ?? 'plain-http,service-off,service-full,straightforward').split(',');
const opts = {
  rounds: Number(args.rounds ?? (smoke ? 1 : 5)),
  duration: Number(args.duration ?? (smoke ? 1 : 10)),
  warmup: smoke ? 0.5 : 3, // seconds of load before the measured window (JIT, pools)
  idle: smoke ? 0.2 : 1,
  connections: 50,
  rateMode: Boolean(args['rate-mode'] || smoke),
  // Absolute rates, so that every configuration (plain node:http the floor) is measured at the
  // same load; 1,000 req/s is about half a core of the traced service.
  rates: (args.rate ?? '300,1000').split(',').map(Number),
  rateRounds: Number(args['rate-rounds'] ?? (args.rounds === '0' ? 3 : (args.rounds ?? (smoke ? 1 : 5)))),
  // A traced process's first seconds have one-time stalls (lazy compilation, the first exports)
  // that would otherwise set a short window's p99.
  rateWarmup: smoke ? 0 : 10,
  startup: Number(args.startup ?? 0),
  againstEnv: envPairs(args['against-env']),
  againstArgs: args['against-args']?.split(' ').filter(Boolean),
  configs: args.against ? configs.flatMap((n) => (SERVICE_CONFIGS.includes(n) ? [n, `${n}${AGAINST}`] : [n])) : configs,
  // Only a full run of this build replaces the committed results; *.tmp is gitignored.
  out: path.join(RESULTS, smoke ? 'smoke.tmp' : args.against ? 'ab.tmp' : ''),
};

/** A measurement that throws is noted as a problem, and the others go on. */
async function interleaved(rounds, names, label, measure, check = () => {}) {
  const samples = [];
  for (let round = 1; round <= rounds; round++) {
    for (const name of names) {
      try {
        const sample = await measure(name, round);
        samples.push(sample);
        check(sample, label(name, round));
      } catch (err) {
        note(`${label(name, round)} failed: ${err.message}`);
      }
    }
  }
  return samples;
}

async function measureAll(all, sink) {
  const exitedCleanly = (s, what) => {
    if (s.exit.code !== 0) note(`${what}: exit ${JSON.stringify(s.exit)} after SIGTERM (see ${path.relative(ROOT, logDir)})`);
  };
  const startups = await interleaved(
    opts.startup,
    opts.configs,
    (name, i) => `${name} start-up sample ${i}`,
    (name) => startupOnly(name, all[name]),
    exitedCleanly,
  );

  const samples = await interleaved(
    opts.rounds,
    opts.configs,
    (name, round) => `${name} round ${round}`,
    async (name, round) => ({ round, ...(await measureClosed(name, all[name], sink, { ...opts, smoke })) }),
    (s, what) => {
      console.error(
        `round ${s.round} ${s.config.padEnd(16)} ${f(s.cpuUsPerRequest).padStart(6)} µs/req ${f(s.rps, 0).padStart(6)} req/s  p99 ${f(s.p99Ms, 2)} ms  RSS ${f(s.rssPeakMb, 0)} MB  start-up ${f(s.startupMs, 0)} ms  spans/req ${f(s.spansPerRequest, 2)}`,
      );
      if (s.errors > 0) note(`${what}: ${s.errors} failed requests`);
      if (!(s.requests > 0)) note(`${what}: no request completed`);
      if (all[s.config].traced && !(s.spansPerRequest > 0)) note(`${what}: no span reached the OTLP sink`);
      if (s.sdk && (s.sdk.dropped > 0 || s.sdk.exportFailed > 0)) note(`${what}: ${s.sdk.dropped} spans dropped, ${s.sdk.exportFailed} failed to export`);
      exitedCleanly(s, what);
    },
  );
  const summary = summarise(samples, opts.configs);

  let rate = [];
  if (opts.rateMode) {
    rate = await interleaved(
      opts.rateRounds,
      opts.rates.flatMap((spec) => opts.configs.map((name) => ({ spec, name }))),
      ({ spec, name }, round) => `${name} at ${spec} req/s, fixed-rate round ${round}`,
      async ({ spec, name }, round) => ({ round, spec, ...(await measureRate(name, all[name], spec, opts)) }),
      (r, what) => {
        console.error(
          `rate  ${r.round} ${r.config.padEnd(16)} ${f(r.rps, 0)}/${r.targetRps} req/s  p50 ${f(r.p50Ms, 2)} ms  p99 ${f(r.p99Ms, 2)} ms  thread wait ${f(r.waitPct, 2)} % (others' ${f(r.machineWaitPct, 2)} %, load late ${f(r.loadLateP99Ms, 2)} ms)  CPU pressure ${f(r.pressurePct, 1)} %`,
        );
        if (r.errors > 0) note(`${what}: ${r.errors} failed requests`);
        if (r.sdk && (r.sdk.dropped > 0 || r.sdk.exportFailed > 0)) note(`${what}: ${r.sdk.dropped} spans dropped, ${r.sdk.exportFailed} failed to export`);
      },
    );
  }

  return { summary, samples, rate, startups };
}

function publish(result, file) {
  result.goals = goals(result.summary, result.rate, result.startups);
  const md = markdown(result);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  fs.writeFileSync(path.join(path.dirname(file), 'latest.md'), md);
  if (file === path.join(RESULTS, 'latest.json')) writeBlock(path.join(ROOT, 'docs', 'performance.md'), 'bench:latest', md);
  console.log(md);
  console.error(`wrote ${path.relative(ROOT, path.dirname(file))}/latest.json and latest.md`);
}

async function main() {
  const started = new Date();
  pinToLoadCore();
  // Copies of the builds, so that a rebuild during the run cannot mix two.
  const serviceDir = opts.configs.some((n) => SERVICE_CONFIGS.includes(n)) ? snapshotService() : ROOT;
  const againstDir = args.against ? snapshotService('against.tmp', path.resolve(args.against)) : undefined;
  const sink = await startSink();
  try {
    const all = configurations(sink.port, serviceDir, againstDir);
    for (const [name, config] of Object.entries(all)) {
      if (!name.endsWith(AGAINST)) continue;
      config.env = { ...config.env, ...opts.againstEnv };
      if (opts.againstArgs) config.nodeArgs = opts.againstArgs;
    }
    for (const name of opts.configs) if (!all[name]) throw new Error(`unknown configuration ${name}; known: ${Object.keys(all).join(', ')}`);
    const measured = await measureAll(all, sink);
    // The other build's revision when its directory says (a REVISION file, as `git rev-parse` wrote it).
    const revisionFile = args.against && path.resolve(args.against, 'REVISION');
    const revision = revisionFile && fs.existsSync(revisionFile) && fs.readFileSync(revisionFile, 'utf8').trim();
    const wrk = execFileSync('sh', ['-c', 'wrk --version 2>&1 | head -1 || true']).toString().trim();
    const result = {
      meta: {
        date: started.toISOString(),
        machine: { ...machineInfo(`server on core ${SERVER_CORE}; load, sink, harness on core ${LOAD_CORE}`), loadGenerator: wrk },
        command: `sh scripts/node.sh bench/run.mjs ${process.argv.slice(2).join(' ')}`.trim(),
        // The output directory relative to the repository: results name no path of the machine.
        options: { ...opts, out: path.relative(ROOT, opts.out) },
        configs: opts.configs,
        service: serviceDir === ROOT ? undefined : `dist/ and package.json copied to ${path.relative(ROOT, serviceDir)} at the start of the run`,
        against:
          againstDir &&
          `the build given to --against${revision ? ` (revision ${revision})` : ''}, copied to ${path.relative(ROOT, againstDir)}${
            args['against-env'] ? `, run with ${args['against-env']}` : ''
          }${args['against-args'] !== undefined ? `, Node flags \`${args['against-args']}\` instead of \`${SERVICE_NODE_ARGS.join(' ')}\`` : ''}`,
      },
      ...measured,
      problems,
    };
    publish(result, path.join(opts.out, 'latest.json'));
  } finally {
    sink.stop();
  }
  endRun();
}

await main();
