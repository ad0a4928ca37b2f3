// Server CPU per POST /product of several builds, interleaved (A B C, then C B A, ...), in the
// chart's default configuration (no collector, LOG_LEVEL=info) and with an OTLP endpoint (the
// local sink, the default sampler). Each build is a directory holding dist/ and package.json
// (bench/results/*.tmp copies, or another checkout built with `npm run build`); the first is the
// one the others are divided by, round by round.
//
//   sh scripts/node.sh bench/ab.mjs --builds base=/path/to/old,new=. [--rounds 7]
import { parseArgs } from 'node:util';
import {
  SERVICE,
  SERVICE_NODE_ARGS,
  SERVICE_NODE_OPTIONS,
  checkResponses,
  closedLoad,
  cpuMicros,
  median,
  pinToLoadCore,
  startServer,
  startSink,
} from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    builds: { type: 'string' },
    rounds: { type: 'string', default: '7' },
  },
});
if (!args.builds) throw new Error('--builds name=dir,name=dir is required');
const builds = Object.fromEntries(args.builds.split(',').map((entry) => entry.split('=')));
const names = Object.keys(builds);
const configs = ['default', 'otlp'];

pinToLoadCore();
const sink = await startSink();
const imageNodeOptions = { NODE_OPTIONS: SERVICE_NODE_OPTIONS };
const envs = {
  default: { ...imageNodeOptions, LOG_LEVEL: 'info' },
  otlp: { ...imageNodeOptions, LOG_LEVEL: 'info', OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' },
};
const samples = {};
try {
  for (let round = 0; round < Number(args.rounds); round += 1) {
    for (const config of configs) {
      for (const name of round % 2 === 0 ? names : [...names].reverse()) {
        const server = await startServer(`ab-${name}-${config}`, { args: SERVICE, nodeArgs: SERVICE_NODE_ARGS, cwd: builds[name], env: envs[config] });
        await checkResponses(name, server.port);
        await closedLoad(server.port, 2, 50);
        const before = cpuMicros(server.pid);
        const load = await closedLoad(server.port, 4, 50);
        const us = (cpuMicros(server.pid) - before) / load.requests;
        const exit = await server.stop();
        if (exit.code !== 0) throw new Error(`${name} ${config} exited ${JSON.stringify(exit)}`);
        (samples[`${config} ${name}`] ??= []).push(us);
        console.log(`round ${round} ${config} ${name}: ${us.toFixed(1)} µs/request, ${Math.round(load.rps)} req/s`);
      }
    }
  }
} finally {
  sink.stop();
}
for (const config of configs) {
  const first = samples[`${config} ${names[0]}`];
  for (const name of names) {
    const own = samples[`${config} ${name}`];
    const ratios = own.map((us, i) => us / first[i]);
    const vs = name === names[0] ? '' : `, ×${names[0]} ${median(ratios).toFixed(3)} (per round ${ratios.map((r) => r.toFixed(2)).join(' ')})`;
    console.log(`${config} ${name}: median ${median(own).toFixed(1)} µs/request${vs}`);
  }
}
