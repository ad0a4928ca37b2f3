// What one pod carries (`npm run bench:capacity`): the image run as the Helm chart runs it, under an
// open-loop load that rises in steps until p99 crosses the latency alert's threshold. What it runs,
// why, and its options: bench/README.md, "What one pod carries". The image is built by the
// Dockerfile alone (no `npm run build` needed), see BUILD_COMMAND below.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import {
  LOAD_CORE,
  PIN,
  RESULTS,
  ROOT,
  SERVER_CORE,
  checkResponses,
  freePorts,
  machineInfo,
  max,
  median,
  min,
  openLoad,
  pinToLoadCore,
  run,
  scrapeSdkCounters,
  startSink,
  waitHealthy,
  endRun,
  note,
  problems,
} from './lib.mjs';
import { writeBlock } from './markdown-block.mjs';
import { f } from './render.mjs';

const { values: args } = parseArgs({
  options: {
    image: { type: 'string' },
    cpus: { type: 'string' },
    ramps: { type: 'string' },
    step: { type: 'string' },
    smoke: { type: 'boolean' },
  },
});

const smoke = Boolean(args.smoke);
const opts = {
  image: args.image ?? 'product-service:capacity',
  // The smoke proves the machinery at 1 CPU only: the request's quota makes start-up and every
  // step several times slower, for nothing more to prove.
  cpus: (smoke ? '1' : (args.cpus ?? '1,request')).split(',').map((s) => s.trim()),
  ramps: smoke ? 1 : Number(args.ramps ?? 3),
  step: Number(args.step ?? (smoke ? 2 : 8)),
  out: smoke ? path.join(RESULTS, 'capacity-smoke.tmp') : RESULTS,
};

/** Debian's docker.io client where present: it drives the engine's BuildKit, the /usr/local/bin 28.x client cannot (scripts/ci/docker-engine.sh). */
const DOCKER = fs.existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';
const HELM = path.join(ROOT, '.tools/bin/helm');
const CHART = path.join(ROOT, 'helm/product-service');
const BUILD_COMMAND =
  "DOCKER_BUILDKIT=1 docker build --network host -t product-service:capacity $(sh scripts/node.sh scripts/ci/dockerfile-bases.mjs --build-args | sed 's/^/--build-arg /') .";

// The search. Rates scale with the CPUs: at ~250 µs of CPU per traced request near saturation (more
// at low rates) the service carries a few thousand requests/s per CPU, so 1000/CPU starts below
// capacity and ×1.25 gets there in a handful of steps; ×1.08 then narrows the last interval to 8 %.
const SEARCH = {
  startRatePerCpu: smoke ? 200 : 1000,
  growth: 1.25,
  refine: 1.08,
  // Achieved/target below this: the load was not carried (the generator queued what it could not send).
  minAchieved: 0.97,
  // A bound on the steps of one ramp, so that a load that never fails cannot run forever.
  maxSteps: smoke ? 3 : 40,
  // Warm-up at a low rate (an eighth to a fifth of what a CPU carries): a traced process stalls for
  // up to ~100 ms a few times in its first seconds (JIT, first span exports, lazy requires).
  warmupRatePerCpu: smoke ? 100 : 500,
  warmupSeconds: smoke ? 2 : 10,
  // Idle after the warm-up: metric collection, GC and span timers cost CPU that counts against the request.
  idleSeconds: smoke ? 1 : 5,
};
/**
 * Under a fraction of a CPU the same one-time work (JIT, first exports) takes that much longer in
 * wall time, and the warm-up's low rate sends fewer requests: up to 3× longer there.
 */
const warmupSeconds = (cpus) => Math.round(SEARCH.warmupSeconds * Math.min(3, 1 / Math.min(1, cpus)));
/** After each step: the span batch processor's schedule (1 s) passes, so the step's spans reach the sink. */
const PAUSE_SECONDS = 2;
/** The HPA should reach its target this far below the capacity at the request (time to schedule and start pods). */
const HPA_HEADROOM = 0.8;

function cpuQuantity(q) {
  const s = String(q);
  return s.endsWith('m') ? Number(s.slice(0, -1)) / 1000 : Number(s);
}

function byteQuantity(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) throw new Error(`cannot read the memory quantity ${q}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2] ?? ''] ?? 1;
  return Math.round(Number(m[1]) * unit);
}

function command(cmd, argv) {
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${argv.join(' ')} failed (${r.status}): ${r.stderr.trim()}`);
  return r.stdout;
}
const docker = (argv) => command(DOCKER, argv).trim();

function helm(argv) {
  if (!fs.existsSync(HELM)) throw new Error(`helm is missing at ${path.relative(ROOT, HELM)}: install it with sh scripts/ci/install-helm.sh`);
  return command(HELM, argv);
}

/**
 * The Deployment's container as `helm template` renders it and, from the values, the two figures
 * that are no part of the pod: the latency alert's threshold and the HPA's CPU target.
 */
function readChart() {
  const docs = parseAllDocuments(helm(['template', 'capacity', CHART])).map((d) => d.toJS());
  const deployment = docs.find((d) => d?.kind === 'Deployment');
  if (!deployment) throw new Error('the chart rendered no Deployment');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const values = parse(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8'));
  const threshold = values.monitoring?.prometheusRule?.slo?.latency?.threshold;
  if (typeof threshold !== 'number') throw new Error('the chart has no monitoring.prometheusRule.slo.latency.threshold');
  const limits = container.resources?.limits ?? {};
  const requests = container.resources?.requests ?? {};
  if (limits.memory === undefined) throw new Error('the chart sets no memory limit: nothing to run the container under');
  const sc = container.securityContext ?? {};
  const podSc = pod.securityContext ?? {};
  return {
    deploymentName: deployment.metadata.name,
    namespace: deployment.metadata.namespace ?? 'default',
    env: container.env ?? [],
    requestCpu: requests.cpu === undefined ? undefined : String(requests.cpu),
    requestCpus: requests.cpu === undefined ? undefined : cpuQuantity(requests.cpu),
    memoryLimit: String(limits.memory),
    memoryLimitBytes: byteQuantity(limits.memory),
    user: sc.runAsUser ?? podSc.runAsUser,
    group: sc.runAsGroup ?? podSc.runAsGroup,
    fsGroup: podSc.fsGroup,
    readOnlyRootFilesystem: Boolean(sc.readOnlyRootFilesystem),
    noNewPrivileges: sc.allowPrivilegeEscalation === false,
    capDrop: sc.capabilities?.drop ?? [],
    writablePaths: (container.volumeMounts ?? []).filter((m) => pod.volumes?.find((v) => v.name === m.name)?.emptyDir).map((m) => m.mountPath),
    graceSeconds: pod.terminationGracePeriodSeconds ?? 30,
    latencyThresholdS: threshold,
    hpaTargetPercent: values.autoscaling?.targetCPUUtilizationPercentage ?? null,
  };
}

/** Kubelet semantics: $(VAR) is an earlier variable's value, $$ a dollar, an unknown name stays. */
function expand(value, defined) {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name) => (name === undefined ? '$' : (defined.get(name) ?? whole)));
}

/**
 * The container's environment as the kubelet would give it, with the OTLP endpoint and the two
 * ports pointing at this machine. Downward-API fields get fixed stand-ins of the same shape (the
 * resource attributes, and so the span batches, are as large as in a pod); Secret, ConfigMap and
 * resource references and envFrom are left out.
 * @returns {Map<string, string>}
 */
function containerEnv(chart, ports) {
  const stand = {
    'metadata.name': `${chart.deploymentName}-6b8f9d7c5d-bench`,
    'metadata.uid': '6f1c0a2e-0000-4000-8000-capacitybench',
    'metadata.namespace': chart.namespace,
    'spec.nodeName': 'capacity-bench-node',
  };
  const env = new Map();
  for (const e of chart.env) {
    if (e.valueFrom?.fieldRef && stand[e.valueFrom.fieldRef.fieldPath] !== undefined) env.set(e.name, stand[e.valueFrom.fieldRef.fieldPath]);
    else if (!e.valueFrom) env.set(e.name, expand(e.value ?? '', env));
  }
  const protocol = env.get('OTEL_EXPORTER_OTLP_PROTOCOL') ?? env.get('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL');
  if (protocol && protocol !== 'http/protobuf') throw new Error(`the chart exports OTLP as ${protocol}; bench/otlp-sink.mjs speaks http/protobuf only`);
  env.set('OTEL_EXPORTER_OTLP_ENDPOINT', `http://127.0.0.1:${ports.sink}`);
  env.delete('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  env.set('PORT', String(ports.http));
  env.set('METRICS_PORT', String(ports.metrics));
  return env;
}

/** `docker run` flags of one container: the pod's user, security settings and memory limit, the CPU setting as a quota on the server core (README: host network, no log driver). */
function dockerFlags(chart, cpus) {
  const flags = [
    '--network host --log-driver none',
    PIN && `--cpuset-cpus ${SERVER_CORE}`,
    `--cpus ${cpus} --memory ${chart.memoryLimitBytes} --memory-swap ${chart.memoryLimitBytes}`,
    chart.readOnlyRootFilesystem && '--read-only',
    // The chart's emptyDirs (/tmp) are on the node's disk; nothing is written there under this load.
    ...chart.writablePaths.map((p) => `--tmpfs ${p}`),
    chart.user !== undefined && `--user ${chart.user}${chart.group === undefined ? '' : `:${chart.group}`}`,
    chart.fsGroup !== undefined && `--group-add ${chart.fsGroup}`,
    ...chart.capDrop.map((cap) => `--cap-drop ${cap}`),
    chart.noNewPrivileges && '--security-opt no-new-privileges',
  ];
  return flags.filter(Boolean).flatMap((flag) => flag.split(' '));
}

function imageInfo(image) {
  let inspect;
  try {
    inspect = JSON.parse(docker(['image', 'inspect', '--format', '{{json .}}', image]));
  } catch {
    throw new Error(
      `image ${image} not found. Build it (the Dockerfile builds the service itself; where no registry is reachable, run bash scripts/ci/base-images.sh first; on Debian's docker.io use /usr/bin/docker):\n  ${BUILD_COMMAND.replace('product-service:capacity', image)}`,
    );
  }
  return { id: inspect.Id, created: inspect.Created, revision: inspect.Config?.Labels?.['org.opencontainers.image.revision'] };
}

function containerState(id) {
  const state = JSON.parse(docker(['inspect', '--format', '{{json .State}}', id]));
  return { running: state.Running, oomKilled: state.OOMKilled, exitCode: state.ExitCode, pid: state.Pid };
}

const readNumber = (file) => Number(fs.readFileSync(file, 'utf8').trim());
const readKeyed = (file) =>
  Object.fromEntries(
    fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => {
        const [key, value] = line.split(' ');
        return [key, Number(value)];
      }),
  );

/**
 * The container's cgroup counters: CPU used (µs, all its processes) and working set (memory in use
 * minus inactive page cache, what the kubelet and the memory alert look at), read from
 * /sys/fs/cgroup (v1 or v2, the path taken from the container's init process).
 * @returns {{source: string, read: () => Promise<{cpuUs: number, workingSetBytes: number}>}}
 */
function containerCounters(pid) {
  const lines = cgroupLines(pid);
  const v1 = (controller, file) => {
    for (const line of lines) {
      const [, controllers = '', rel = ''] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
      if (!controllers.split(',').includes(controller)) continue;
      for (const mount of [controllers, controller]) {
        const dir = path.join('/sys/fs/cgroup', mount, rel);
        if (fs.existsSync(path.join(dir, file))) return dir;
      }
    }
    return undefined;
  };
  const cpuacct = v1('cpuacct', 'cpuacct.usage');
  const memory = v1('memory', 'memory.usage_in_bytes');
  if (cpuacct && memory) {
    return {
      source: `cgroup v1 (${path.relative('/sys/fs/cgroup', cpuacct)}, memory)`,
      read: async () => ({
        cpuUs: readNumber(path.join(cpuacct, 'cpuacct.usage')) / 1000,
        workingSetBytes: readNumber(path.join(memory, 'memory.usage_in_bytes')) - (readKeyed(path.join(memory, 'memory.stat')).total_inactive_file ?? 0),
      }),
    };
  }
  const unified = lines.map((line) => /^0::(.*)$/.exec(line)?.[1]).find((rel) => rel !== undefined);
  const v2 = unified === undefined ? undefined : path.join('/sys/fs/cgroup', unified);
  if (v2 && fs.existsSync(path.join(v2, 'memory.current')) && fs.existsSync(path.join(v2, 'cpu.stat'))) {
    return {
      source: `cgroup v2 (${unified})`,
      read: async () => ({
        cpuUs: readKeyed(path.join(v2, 'cpu.stat')).usage_usec,
        workingSetBytes: readNumber(path.join(v2, 'memory.current')) - (readKeyed(path.join(v2, 'memory.stat')).inactive_file ?? 0),
      }),
    };
  }
  throw new Error(`no cgroup counters of the container (process ${pid}) under /sys/fs/cgroup: the Docker engine must run on this kernel`);
}

function cgroupLines(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
  } catch {
    return [];
  }
}

const MiB = 2 ** 20;

/** The container of the ramp in progress and the sink, removed and stopped on Ctrl-C as well. */
let current;
let sinkRunning;
process.once('SIGINT', () => {
  if (current) spawnSync(DOCKER, ['rm', '--force', current.id], { stdio: 'ignore' });
  sinkRunning?.stop();
  process.exit(130);
});

/** Starts the image as the chart's pod with `cpus` as its quota and waits for /health (removes it if it never answers). */
async function startContainer(chart, cpus, sink, name) {
  const [httpPort, metricsPort] = await freePorts(2);
  const env = containerEnv(chart, { sink: sink.port, http: httpPort, metrics: metricsPort });
  const id = docker(['run', '-d', '--name', name, ...dockerFlags(chart, cpus), ...[...env].flatMap(([k, v]) => ['--env', `${k}=${v}`]), opts.image]);
  current = { id };
  // Timed from when the container runs: creating it is Docker's work (with the vfs storage driver, a copy of the image).
  const t1 = performance.now();
  try {
    const exited = () => !containerState(id).running;
    if (!(await waitHealthy(name, httpPort, exited, 50))) {
      const state = containerState(id);
      throw new Error(
        `${name} exited during start-up (exit ${state.exitCode}${state.oomKilled ? ', OOM-killed' : ''}); its output is not kept (--log-driver none): run the image by hand to see it`,
      );
    }
  } catch (err) {
    spawnSync(DOCKER, ['rm', '--force', id], { stdio: 'ignore' });
    current = undefined;
    throw err;
  }
  const startupMs = performance.now() - t1;
  const state = containerState(id);
  return { id, port: httpPort, metricsPort, startupMs, counters: containerCounters(state.pid) };
}

/** `prev` holds the sink and SDK counters after the previous step. */
async function runStep(c, chart, cpus, sink, rate, seconds, prev, judged) {
  const before = await c.counters.read();
  const samples = [];
  const timer = setInterval(() => {
    c.counters.read().then(
      (s) => samples.push(s.workingSetBytes),
      () => {},
    );
  }, 250);
  const t0 = performance.now();
  let load;
  try {
    load = await openLoad(c.port, seconds, rate);
  } finally {
    clearInterval(timer);
  }
  const after = await c.counters.read();
  // The whole step: the load generator's start (~0.1 s) and the drain of the last answers included.
  const wallS = (performance.now() - t0) / 1000;
  samples.push(after.workingSetBytes);
  // The step's spans are exported within the batch processor's schedule; then count them.
  await sleep(PAUSE_SECONDS * 1000);
  const state = containerState(c.id);
  const sinkNow = (await sink.stats()).traces;
  const sdkNow = state.running ? await scrapeSdkCounters(c.metricsPort) : undefined;
  const cpuUs = after.cpuUs - before.cpuUs;
  const step = {
    target: rate,
    rps: load.rps,
    requests: load.requests,
    errors: load.errors,
    non2xx: load.non2xx,
    p50Ms: load.latency_ms.p50,
    p99Ms: load.latency_ms.p99,
    maxMs: load.latency_ms.max,
    wallS,
    cpuUs,
    cpuUsPerRequest: cpuUs / load.requests,
    quotaUtilisation: cpuUs / (cpus * 1e6 * wallS),
    workingSetPeakMb: max(samples) / MiB,
    spansPerRequest: (sinkNow.items - prev.spans) / load.requests,
    spansDropped: sdkNow && prev.sdk ? sdkNow.dropped - prev.sdk.dropped : null,
    spansExportFailed: sdkNow && prev.sdk ? sdkNow.exportFailed - prev.sdk.exportFailed : null,
    running: state.running,
    oomKilled: state.oomKilled,
  };
  prev.spans = sinkNow.items;
  prev.sdk = sdkNow;
  const thresholdMs = chart.latencyThresholdS * 1000;
  const why = [];
  if (!(step.p99Ms < thresholdMs)) why.push(`p99 ${f(step.p99Ms, 1)} ms ≥ ${thresholdMs} ms`);
  if (step.errors > 0 || step.non2xx > 0) why.push(`${step.errors} unanswered, ${step.non2xx} non-2xx`);
  if (!(step.rps >= SEARCH.minAchieved * rate)) why.push(`${f(step.rps, 0)} req/s achieved`);
  if (!state.running) why.push(state.oomKilled ? 'OOM-killed' : `container exited (${state.exitCode})`);
  if (!(max(samples) < chart.memoryLimitBytes)) why.push('memory at the limit');
  if (step.spansDropped === null) why.push('/metrics did not answer');
  else if (step.spansDropped > 0 || step.spansExportFailed > 0) why.push(`${step.spansDropped} spans dropped, ${step.spansExportFailed} failed`);
  step.pass = why.length === 0;
  step.failed = why;
  console.error(
    `  ${String(rate).padStart(6)} req/s: ${f(step.rps, 0).padStart(6)} achieved, p50 ${f(step.p50Ms, 2)} p99 ${f(step.p99Ms, 1)} max ${f(step.maxMs, 0)} ms, ${f(step.cpuUsPerRequest, 0)} µs/req, quota ${f(step.quotaUtilisation * 100, 0)} %, ${f(step.workingSetPeakMb, 0)} MiB, spans/req ${f(step.spansPerRequest, 2)} ${!judged ? '(warm-up)' : step.pass ? 'pass' : `FAIL (${why.join('; ')})`}`,
  );
  return step;
}

/**
 * One ramp on a fresh container: warm-up, idle, then steps rising ×SEARCH.growth until one fails (falling
 * ÷SEARCH.growth instead if the first fails), then ×SEARCH.refine steps from the last pass towards that failure.
 * The capacity is the highest passing rate; `bounded` is false when no step failed (the smoke, or
 * SEARCH.maxSteps reached), so the capacity is only a lower bound.
 */
async function runRamp(chart, setting, sink, index) {
  const { cpus } = setting;
  const name = `product-service-capacity-${process.pid}-${index}`;
  console.error(`\n${setting.label}, ramp ${index}: ${opts.image} as ${name}`);
  await sink.reset();
  const c = await startContainer(chart, cpus, sink, name);
  const ramp = { cpus, label: setting.label, ramp: index, startupMs: c.startupMs, counters: c.counters.source, steps: [] };
  try {
    await checkResponses(name, c.port);
    const prev = { spans: 0, sdk: await scrapeSdkCounters(c.metricsPort) };
    const step = (rate, seconds = opts.step, judged = true) => runStep(c, chart, cpus, sink, rate, seconds, prev, judged);
    console.error(`  /health 200 after ${f(c.startupMs, 0)} ms (counters: ${c.counters.source})`);
    ramp.warmup = await step(Math.max(1, Math.round(SEARCH.warmupRatePerCpu * cpus)), warmupSeconds(cpus), false);
    const idle0 = await c.counters.read();
    await sleep(SEARCH.idleSeconds * 1000);
    const idle1 = await c.counters.read();
    ramp.idle = {
      seconds: SEARCH.idleSeconds,
      millicores: (idle1.cpuUs - idle0.cpuUs) / (SEARCH.idleSeconds * 1000),
      workingSetMb: idle1.workingSetBytes / MiB,
    };
    console.error(`  idle: ${f(ramp.idle.millicores, 1)} millicores, ${f(ramp.idle.workingSetMb, 0)} MiB`);

    const alive = () => ramp.steps.at(-1)?.running !== false;
    let passed; // the highest passing rate
    let failed; // the lowest failing rate of the coarse search
    let rate = Math.max(1, Math.round(SEARCH.startRatePerCpu * cpus));
    while (ramp.steps.length < SEARCH.maxSteps && alive() && rate >= 1) {
      const s = await step(rate);
      ramp.steps.push(s);
      if (s.pass) {
        passed = rate;
        if (failed !== undefined) break;
        rate = Math.max(rate + 1, Math.round(rate * SEARCH.growth));
      } else {
        failed = rate;
        if (passed !== undefined) break;
        rate = Math.floor(rate / SEARCH.growth);
      }
    }
    // Kept apart from `rate` and `passed`, which the refinement moves.
    const coarseFail = failed;
    if (coarseFail !== undefined && passed !== undefined) {
      const next = (r) => Math.max(r + 1, Math.round(r * SEARCH.refine));
      for (let r = next(passed); r < coarseFail && ramp.steps.length < SEARCH.maxSteps && alive(); r = next(r)) {
        const s = await step(r);
        ramp.steps.push(s);
        if (!s.pass) break;
        passed = r;
      }
    }
    ramp.capacity = passed ?? 0;
    ramp.bounded = coarseFail !== undefined;
    const last = ramp.steps.at(-1);
    if (last && !last.running) ramp.died = last.oomKilled ? `OOM-killed at ${last.target} req/s` : `exited at ${last.target} req/s`;
  } finally {
    ramp.exit = await stopContainer(c, chart);
    current = undefined;
  }
  // Every span, the last batch flushed on SIGTERM included, against every answered request.
  const requests = [ramp.warmup, ...ramp.steps].reduce((n, s) => n + (s?.requests ?? 0), 0);
  ramp.spansPerRequest = (await sink.stats()).traces.items / requests;
  console.error(
    `  capacity ${ramp.bounded ? '' : '≥ '}${ramp.capacity} req/s${ramp.died ? ` (container ${ramp.died})` : ''}; exit ${ramp.exit.code}; ${f(ramp.spansPerRequest, 2)} spans/request over the ramp`,
  );
  return ramp;
}

async function stopContainer(c, chart) {
  let state = containerState(c.id);
  if (state.running) {
    await run(DOCKER, ['stop', '--time', String(chart.graceSeconds), c.id]);
    state = containerState(c.id);
  }
  docker(['rm', c.id]);
  return { code: state.exitCode, oomKilled: state.oomKilled };
}

function summarise(ramps, chart) {
  const settings = [...new Set(ramps.map((r) => r.cpus))];
  const rows = settings.map((cpus) => {
    const rs = ramps.filter((r) => r.cpus === cpus);
    const atCapacity = rs.map((r) => r.steps.filter((s) => s.pass && s.target === r.capacity).at(-1)).filter(Boolean);
    const passing = rs.flatMap((r) => r.steps.filter((s) => s.pass));
    const capacity = median(rs.map((r) => r.capacity));
    return {
      cpus,
      isRequest: chart.requestCpus !== undefined && Math.abs(cpus - chart.requestCpus) < 1e-9,
      capacity,
      capacityMin: min(rs.map((r) => r.capacity)),
      capacityMax: max(rs.map((r) => r.capacity)),
      bounded: rs.every((r) => r.bounded),
      perCpu: capacity / cpus,
      cpuUsPerRequest: median(atCapacity.map((s) => s.cpuUsPerRequest)),
      p99Ms: median(atCapacity.map((s) => s.p99Ms)),
      quotaUtilisation: median(atCapacity.map((s) => s.quotaUtilisation)),
      memoryPeakMb: max(passing.map((s) => s.workingSetPeakMb)),
      spansDroppedAtCapacity: atCapacity.reduce((n, s) => n + (s.spansDropped ?? 0), 0),
      spansDroppedBeyond: rs.reduce((n, r) => n + r.steps.filter((s) => !s.pass).reduce((m, s) => m + (s.spansDropped ?? 0), 0), 0),
      idleMillicores: median(rs.map((r) => r.idle?.millicores)),
      died: rs.map((r) => r.died).filter(Boolean),
    };
  });
  return { rows, hpa: hpaSummary(ramps, chart, rows) };
}

/**
 * Where the HPA starts scaling out, per pod: target% × request ÷ CPU per request. The CPU per
 * request is taken at moderate load, from the highest passing step of the request's ramps whose use
 * of the request was still within the target (the load just before the HPA acts; the container's
 * whole CPU, background work included), else from their lowest step.
 */
function hpaSummary(ramps, chart, rows) {
  const row = rows.find((r) => r.isRequest);
  if (chart.requestCpus === undefined || !row) return { measured: false };
  if (!chart.hpaTargetPercent) return { measured: true, noTarget: true };
  const target = chart.hpaTargetPercent / 100;
  const moderate = ramps
    .filter((r) => r.cpus === row.cpus)
    .map((r) => {
      const steps = r.steps.filter((s) => s.pass);
      const within = steps.filter((s) => s.cpuUs / (chart.requestCpus * 1e6 * s.wallS) <= target);
      return within.at(-1) ?? steps[0] ?? r.warmup;
    })
    .filter(Boolean);
  const usPerRequest = median(moderate.map((s) => s.cpuUsPerRequest));
  const scaleOutRate = (target * chart.requestCpus * 1e6) / usPerRequest;
  // Against the worst ramp, not the median: the HPA must act in time on a bad minute too.
  const share = scaleOutRate / row.capacityMin;
  return {
    measured: true,
    targetPercent: chart.hpaTargetPercent,
    usPerRequest,
    atRate: median(moderate.map((s) => s.target)),
    scaleOutRate,
    capacity: row.capacityMin,
    capacityMedian: row.capacity,
    share,
    // The scale-out rate grows with the target: the target that scales out at HPA_HEADROOM of the
    // capacity. At most 100 %: under the request's quota the pod cannot use more than its request.
    targetForHeadroom: Math.min(100, Math.floor((chart.hpaTargetPercent * HPA_HEADROOM) / share)),
  };
}

function settingLabel(cpus, chart) {
  return chart.requestCpus !== undefined && Math.abs(cpus - chart.requestCpus) < 1e-9 ? `${cpus} (the chart's request, ${chart.requestCpu})` : String(cpus);
}

function markdown(result, chart) {
  const { meta } = result;
  const { rows, hpa } = summarise(result.ramps, chart);
  const m = meta.machine;
  const used = meta.chart;
  const { search } = meta;
  const lines = [
    `Measured ${meta.date} on ${m.nproc} × ${m.cpu}, ${m.memGb} GiB, Linux ${m.kernel}; image ${meta.image.name} (${meta.image.id.slice(7, 19)}${meta.image.revision && meta.image.revision !== 'unknown' ? `, revision ${meta.image.revision.slice(0, 12)}` : ''}).`,
    `Command: \`${meta.command}\` (${meta.ramps} ramp${meta.ramps === 1 ? '' : 's'} per setting, each on a fresh container; ${meta.stepSeconds} s steps). Rerun: build the image, then \`npm run bench:capacity\` (bench/README.md, "What one pod carries").`,
    '',
    `How: the image run as the chart's pod (\`docker run\` with the chart's env, LOG_LEVEL ${used.logLevel}, NODE_OPTIONS \`${used.nodeOptions}\`, user, read-only root, no capabilities, memory limit ${used.memoryLimit} as \`--memory\`; the CPUs below as a quota on one core; host network, no log driver), every request traced and exported over OTLP/HTTP to a local sink; open-loop POST /product (64 connections, latency from the intended send time) rising ×${search.growth} per step from ${search.startRatePerCpu} req/s per CPU after a ${search.warmupSeconds} s warm-up (up to 3× longer under a fraction of a CPU), then ×${search.refine} from the last pass. A step passes with p99 < ${used.latencyThresholdS * 1000} ms (the latency SLO threshold the alerts use), no error or non-2xx, ≥ ${search.minAchieved * 100} % of the rate achieved, no span dropped or failed, the container alive and its working set under the memory limit. Capacity = the highest passing rate.`,
    '',
    '| CPUs | capacity req/s, median (min–max) | req/s per CPU | CPU µs/req near capacity | p99 ms at capacity | CPU used, of the quota | peak memory MiB / limit | spans dropped at capacity (beyond) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const ge = r.bounded ? '' : '≥ ';
    lines.push(
      `| ${settingLabel(r.cpus, chart)} | ${ge}${f(r.capacity, 0)} (${f(r.capacityMin, 0)}–${f(r.capacityMax, 0)}) | ${ge}${f(r.perCpu, 0)} | ${f(r.cpuUsPerRequest, 0)} | ${f(r.p99Ms, 1)} | ${f(r.quotaUtilisation * 100, 0)} % | ${f(r.memoryPeakMb, 0)} / ${f(used.memoryLimitBytes / MiB, 0)} | ${r.spansDroppedAtCapacity} (${r.spansDroppedBeyond}) |`,
    );
  }
  lines.push('');
  const request = rows.find((r) => r.isRequest);
  const whole = rows.find((r) => r.cpus === 1);
  const perPod = [];
  if (request) perPod.push(`${request.bounded ? '' : '≥ '}${f(request.capacity, 0)} req/s held to its CPU request (${chart.requestCpu})`);
  if (whole) perPod.push(`${whole.bounded ? '' : '≥ '}${f(whole.capacity, 0)} req/s given a whole CPU`);
  if (perPod.length) lines.push(`At the chart's defaults, one pod carries ${perPod.join(', and ')}.`);
  if (request) {
    const share = request.idleMillicores / (chart.requestCpus * 1000);
    lines.push(
      `Idle, the container uses ${f(request.idleMillicores, 1)} millicores (${f(share * 100, 0)} % of the request), which counts towards the HPA's utilisation.`,
    );
  }
  const died = rows.flatMap((r) => r.died.map((d) => `${r.cpus} CPU: ${d}`));
  if (died.length) lines.push(`Containers that died during a ramp: ${died.join('; ')}.`);
  if (!hpa.measured) {
    lines.push(
      chart.requestCpus === undefined
        ? 'The chart sets no CPU request: the HPA has nothing to measure utilisation against.'
        : `The chart's current CPU request (${chart.requestCpu}) was not measured: rerun with \`--cpus request\` for the HPA comparison.`,
    );
  } else if (hpa.noTarget) {
    lines.push("The chart's HPA has no CPU target (autoscaling.targetCPUUtilizationPercentage).");
  } else {
    const verdict =
      hpa.share <= HPA_HEADROOM
        ? `it scales out before p99 crosses ${used.latencyThresholdS * 1000} ms`
        : hpa.share < 1
          ? `it scales out before p99 crosses ${used.latencyThresholdS * 1000} ms, but with less than ${f((1 - HPA_HEADROOM) * 100, 0)} % headroom`
          : `p99 crosses ${used.latencyThresholdS * 1000} ms before the HPA scales out`;
    lines.push(
      `HPA: at its target of ${hpa.targetPercent} % of the ${chart.requestCpu} request, a pod starts scaling out at ≈ ${f(hpa.scaleOutRate, 0)} req/s (${hpa.targetPercent} % × ${chart.requestCpu} ÷ ${f(hpa.usPerRequest, 0)} µs/req, measured at ${f(hpa.atRate, 0)} req/s), ${f(hpa.share * 100, 0)} % of the lowest capacity at the request over the ramps (${f(hpa.capacity, 0)} req/s; median ${f(hpa.capacityMedian, 0)}): ${verdict}. With a target of at most ${hpa.targetForHeadroom} %, it would scale out by ${f(HPA_HEADROOM * 100, 0)} % of that capacity.`,
    );
  }
  return lines.join('\n') + '\n';
}

function settingsOf(chart) {
  const settings = opts.cpus.map((entry) => {
    if (entry === 'request') {
      if (chart.requestCpus === undefined) throw new Error('--cpus request: the chart sets no resources.requests.cpu');
      return chart.requestCpus;
    }
    const cpus = Number(entry);
    if (!(cpus > 0)) throw new Error(`--cpus: ${entry} is neither a number of CPUs nor "request"`);
    // The container is pinned to the server core, so more than one CPU could not be used.
    if (cpus > 1 && PIN) throw new Error(`--cpus ${entry}: the container runs on one core (core ${SERVER_CORE}); at most 1`);
    return cpus;
  });
  return [...new Set(settings)].map((cpus) => ({ cpus, label: `${settingLabel(cpus, chart)} CPU` }));
}

function publish(result, chart) {
  const md = markdown(result, chart);
  fs.mkdirSync(opts.out, { recursive: true });
  fs.writeFileSync(path.join(opts.out, 'capacity.json'), JSON.stringify(result, null, 2) + '\n');
  // A full run's table has one home, docs/performance.md; a smoke's stays beside its JSON.
  const table = smoke ? path.join(opts.out, 'capacity.md') : undefined;
  if (table) fs.writeFileSync(table, md);
  else writeBlock(path.join(ROOT, 'docs', 'performance.md'), 'bench:capacity', md);
  console.log(md);
  console.error(
    `wrote ${path.relative(ROOT, opts.out)}/capacity.json and ${table ? path.relative(ROOT, table) : 'the bench:capacity block of docs/performance.md'}`,
  );
}

/** The smoke's checks: the machinery worked (container, counters, spans, clean exit); no timing. */
function checkSmoke(ramps) {
  for (const r of ramps) {
    const steps = [r.warmup, ...r.steps];
    if (r.steps.length === 0) note('the smoke ran no step');
    if (steps.some((s) => s.errors > 0 || s.non2xx > 0)) note('requests failed or were answered non-2xx at low rates');
    if (!steps.every((s) => s.cpuUs > 0 && s.workingSetPeakMb > 0)) note(`the container's counters (${r.counters}) did not move`);
    if (!steps.every((s) => s.spansDropped !== null)) note("the service's /metrics did not answer");
  }
}

async function main() {
  const started = new Date();
  const chart = readChart();
  const settings = settingsOf(chart);
  const image = imageInfo(opts.image);
  pinToLoadCore();
  const sink = await startSink();
  sinkRunning = sink;
  const ramps = [];
  try {
    // Settings interleaved over the ramps (A B A B ...): this machine is shared, a slow minute
    // should not fall on one setting only.
    for (let i = 1; i <= opts.ramps; i++) {
      for (const setting of settings) {
        try {
          const ramp = await runRamp(chart, setting, sink, i);
          ramps.push(ramp);
          if (ramp.exit.code !== 0) note(`${setting.label} ramp ${i}: exit ${ramp.exit.code}${ramp.exit.oomKilled ? ' (OOM-killed)' : ''} after docker stop`);
          if (!(ramp.spansPerRequest > 0)) note(`${setting.label} ramp ${i}: no span reached the OTLP sink`);
          if (ramp.capacity === 0) note(`${setting.label} ramp ${i}: no step passed`);
        } catch (err) {
          note(`${setting.label} ramp ${i} failed: ${err.message}`);
        }
      }
    }
  } finally {
    sink.stop();
  }
  if (smoke) checkSmoke(ramps);
  if (ramps.length > 0) {
    const env = containerEnv(chart, { sink: '<sink port>', http: '<free port>', metrics: '<free port>' });
    publish(
      {
        meta: {
          date: started.toISOString(),
          machine: machineInfo(`container on core ${SERVER_CORE} (docker --cpuset-cpus); load, OTLP sink, harness on core ${LOAD_CORE}`),
          command: `sh scripts/node.sh bench/capacity.mjs ${process.argv.slice(2).join(' ')}`.trim(),
          smoke,
          ramps: opts.ramps,
          stepSeconds: opts.step,
          image: { name: opts.image, ...image },
          chart: {
            ...Object.fromEntries(Object.entries(chart).filter(([key]) => key !== 'env')),
            logLevel: env.get('LOG_LEVEL'),
            nodeOptions: env.get('NODE_OPTIONS'),
          },
          search: SEARCH,
        },
        ramps,
        problems,
      },
      chart,
    );
  }
  endRun();
}

await main();
