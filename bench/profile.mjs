// Where does a configuration's CPU time go? Runs one configuration under `node --cpu-prof` (Node's
// default 1 ms sampling: finer sampling costs the server CPU of its own and inflates the share of
// system calls) with closed-loop load, as bench/run.mjs runs it; SIGTERM, as Node writes the
// profile on a clean exit.
//
//   npm run bench:profile -- [--config service-full] [--duration 10]
//
// The raw .cpuprofile stays in bench/results/profile.tmp/ (open it in Chrome DevTools or speedscope).
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { RESULTS, ROOT, configurations, pinToLoadCore, startSink, startServer, closedLoad, checkResponses, cpuMicros } from './lib.mjs';
import { header, row } from './render.mjs';

const { values: args } = parseArgs({ options: { config: { type: 'string', default: 'service-full' }, duration: { type: 'string', default: '10' } } });
const [WARMUP, CONNECTIONS, TOP] = [3, 50, 25];
const profDir = path.join(RESULTS, 'profile.tmp');

async function record() {
  pinToLoadCore();
  fs.rmSync(profDir, { recursive: true, force: true });
  fs.mkdirSync(profDir, { recursive: true });
  const sink = await startSink();
  try {
    const config = configurations(sink.port)[args.config];
    if (!config) throw new Error(`unknown configuration ${args.config}`);
    config.nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${profDir}`];
    const server = await startServer(args.config, config);
    await checkResponses(args.config, server.port);
    await closedLoad(server.port, WARMUP, CONNECTIONS);
    // V8 stamps samples with the monotonic clock in µs, the same clock as process.hrtime, so
    // the summary can keep only the measured window (no start-up, no warm-up, no shutdown).
    const windowUs = [Number(process.hrtime.bigint() / 1000n)];
    const cpu0 = cpuMicros(server.pid);
    const load = await closedLoad(server.port, Number(args.duration), CONNECTIONS);
    const cpuUs = (cpuMicros(server.pid) - cpu0) / load.requests;
    windowUs.push(Number(process.hrtime.bigint() / 1000n));
    const exit = await server.stop();
    if (exit.code !== 0) throw new Error(`${args.config} exited ${JSON.stringify(exit)}; no profile written`);
    await sleep(100);
    const file = fs.readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no .cpuprofile in ${profDir}`);
    return { file: path.join(profDir, file), load, cpuUs, windowUs };
  } finally {
    sink.stop();
  }
}

function moduleOf(callFrame) {
  const url = callFrame.url;
  if (!url) return callFrame.functionName.startsWith('(') ? callFrame.functionName : '(native/builtin)';
  if (url.startsWith('node:')) {
    const parts = url.slice(5).split('/');
    return parts[0] === 'internal' ? `node:internal/${parts[1].replace(/\.js$/, '')}` : `node:${parts[0]}`;
  }
  const file = url.replace(/^file:\/\//, '');
  const i = file.lastIndexOf('/node_modules/');
  if (i >= 0) {
    const parts = file.slice(i + '/node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  return `app:${path.relative(ROOT, file)}`;
}

function summarise(profile, top, windowUs) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // timeDeltas[i] is the time between sample i-1 and sample i: attribute it to sample i.
  const selfUs = new Map();
  let total = 0;
  let t = profile.startTime;
  profile.samples.forEach((id, i) => {
    const dt = Math.max(0, profile.timeDeltas[i] ?? 0);
    t += profile.timeDeltas[i] ?? 0;
    if (t < windowUs[0] || t > windowUs[1]) return;
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
    total += dt;
  });
  if (total === 0) throw new Error('no samples in the measured window: clocks differ?');
  const idle = [...selfUs].filter(([id]) => byId.get(id).callFrame.functionName === '(idle)').reduce((a, [, t]) => a + t, 0);
  const busy = total - idle;

  const fnSelf = new Map();
  const modSelf = new Map();
  const pkgIncl = new Map();
  const fnIncl = new Map();
  for (const [id, t] of selfUs) {
    const node = byId.get(id);
    const cf = node.callFrame;
    if (cf.functionName === '(idle)') continue;
    // A native/builtin frame (no URL: Buffer ops, writev, JSON.stringify...) is charged to the
    // module of its nearest JavaScript caller, so "who asked for it" shows.
    let mod = moduleOf(cf);
    let fnKey = `${cf.functionName || '(anonymous)'} ${mod}${cf.url ? `:${cf.lineNumber + 1}` : ''}`;
    if (mod === '(native/builtin)') {
      let cur = parent.get(id);
      while (cur !== undefined && !byId.get(cur).callFrame.url) cur = parent.get(cur);
      mod = cur === undefined ? '(native/builtin)' : moduleOf(byId.get(cur).callFrame);
      fnKey = `${cf.functionName || '(anonymous)'} (native, called from ${mod})`;
    }
    fnSelf.set(fnKey, (fnSelf.get(fnKey) ?? 0) + t);
    modSelf.set(mod, (modSelf.get(mod) ?? 0) + t);
    // Inclusive: each package and each JavaScript function on this sample's stack once (recursion counted once).
    const [pkgs, fns] = [new Set(), new Set()];
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const c = byId.get(cur).callFrame;
      const m = moduleOf(c);
      if (!m.startsWith('(') && !m.startsWith('node:')) pkgs.add(m);
      if (c.url) fns.add(`${c.functionName || '(anonymous)'} ${m}:${c.lineNumber + 1}`);
    }
    for (const m of pkgs) pkgIncl.set(m, (pkgIncl.get(m) ?? 0) + t);
    for (const k of fns) fnIncl.set(k, (fnIncl.get(k) ?? 0) + t);
  }
  const table = (map, n) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, t]) => ({ name: k, ms: t / 1000, pct: (100 * t) / busy }));
  return {
    totalMs: total / 1000,
    busyMs: busy / 1000,
    idlePct: (100 * idle) / total,
    functions: table(fnSelf, top),
    modules: table(modSelf, top),
    inclusive: table(pkgIncl, top),
    inclusiveFunctions: table(fnIncl, top * 2),
  };
}

function markdown(s, meta) {
  const table = (title, what, items) => [
    `## ${title}`,
    '',
    ...header([what, 'ms', '%']),
    ...items.map((r) => row([r.name.replace(/\|/g, '\\|'), r.ms.toFixed(0), r.pct.toFixed(1)])),
    '',
  ];
  return [
    `# CPU profile: ${meta.config}`,
    '',
    `${meta.date}, Node ${process.version}. ${meta.detail}`,
    `Busy (non-idle) time ${s.busyMs.toFixed(0)} ms of ${s.totalMs.toFixed(0)} ms sampled (idle ${s.idlePct.toFixed(1)} %). Percentages are of busy time.`,
    `Profile: \`${meta.file}\`.`,
    '',
    ...table("Self time by module (native frames charged to their JavaScript caller's module)", 'module', s.modules),
    ...table("Inclusive time by package (time anywhere below the package's frames)", 'package', s.inclusive),
    ...table('Inclusive time by function (JavaScript frames)', 'function module:line', s.inclusiveFunctions),
    ...table('Self time by function', 'function module:line', s.functions),
  ].join('\n');
}

const r = await record();
const detail =
  `Closed-loop wrk load, ${CONNECTIONS} connections, ${args.duration} s after ${WARMUP} s warm-up: ` +
  `${r.load.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(1)} CPU µs/request (with the profiler on: compare only within a profile). Only samples from the measured window.`;
const summary = summarise(JSON.parse(fs.readFileSync(r.file, 'utf8')), TOP, r.windowUs);
const md = markdown(summary, { config: args.config, date: new Date().toISOString(), detail, file: path.relative(ROOT, r.file) });
const out = path.join(RESULTS, `profile-${args.config}.md`);
fs.writeFileSync(out, md);
console.log(md);
console.error(`wrote ${path.relative(ROOT, out)}`);
