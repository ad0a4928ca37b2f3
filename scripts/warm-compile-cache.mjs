// Fills Node's compile cache for the container image (Dockerfile, stage compile-cache): starts the
// service once the way the image runs it, waits until it answers /health, stops it with SIGTERM
// (Node writes the cache as it exits) and makes the cache readable to every user (Node writes its files 0600; the image copies them owned
// by root, and the service runs as 65532).
//
//   node scripts/warm-compile-cache.mjs CACHE_DIR path/to/dist/main.js
//
// A cache is used only by the same Node build, V8 flags and CPU features, the same user id and
// the same absolute file paths: run this with the runtime image's own Node, as its user, on the
// files at the paths the image runs them from. Tracing is on (an OTLP endpoint nobody listens
// on; no request is made, so nothing is exported), as in production.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const [cacheDir, main] = process.argv.slice(2).map((p) => p && path.resolve(p));
if (cacheDir === undefined || main === undefined) {
  console.error('usage: node warm-compile-cache.mjs CACHE_DIR path/to/dist/main.js');
  process.exit(2);
}
const TIMEOUT_MS = 120_000; // generous: a multi-platform build may run this under emulation

fs.mkdirSync(cacheDir, { recursive: true });
// The warm-up's own V8 flags too: the cache is keyed by them (--no-incremental-marking changes the code).
const child = spawn(process.execPath, [...process.execArgv, main], {
  env: {
    ...process.env,
    NODE_COMPILE_CACHE: cacheDir,
    // Ports the kernel picks: the service logs them.
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    OTEL_SDK_DISABLED: 'false',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let port;
let pending = '';
child.stdout.setEncoding('utf8').on('data', (chunk) => {
  process.stderr.write(chunk);
  const lines = (pending + chunk).split('\n');
  pending = lines.pop() ?? '';
  for (const line of lines) {
    try {
      const entry = JSON.parse(line);
      if (entry.msg === 'product-service listening') port = entry.port;
    } catch {
      // not a log line
    }
  }
});
const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
let running = true;
void exited.then(() => {
  running = false;
});

async function healthy() {
  if (port === undefined) return false;
  try {
    return (await fetch(`http://127.0.0.1:${port}/health`)).ok;
  } catch {
    return false;
  }
}

try {
  const deadline = Date.now() + TIMEOUT_MS;
  while (running && !(await healthy())) {
    if (Date.now() > deadline) throw new Error(`the service did not answer /health within ${TIMEOUT_MS / 1000} s`);
    await sleep(50);
  }
  if (!running) throw new Error(`the service exited during start-up: ${JSON.stringify(await exited)}`);
  child.kill('SIGTERM');
  const exit = await exited;
  if (exit.code !== 0) throw new Error(`the service exited with ${JSON.stringify(exit)} on SIGTERM`);
} finally {
  if (running) child.kill('SIGKILL');
}

let files = 0;
let bytes = 0;
for (const name of fs.readdirSync(cacheDir, { recursive: true })) {
  const file = path.join(cacheDir, String(name));
  const stat = fs.statSync(file);
  fs.chmodSync(file, stat.isDirectory() ? 0o755 : 0o644);
  if (stat.isFile()) {
    files++;
    bytes += stat.size;
  }
}
fs.chmodSync(cacheDir, 0o755);
console.error(`compile cache: ${files} files, ${(bytes / 1e6).toFixed(1)} MB in ${cacheDir}`);
