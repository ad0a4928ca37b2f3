// `npm run dev`: the service as `npm start` runs it (dist-dev/main.js: telemetry first, then the
// service), rebuilt and restarted when a file under src/ changes, its JSON log lines shown by
// pino-pretty. `npm run dev:debug` (or `npm run dev -- --inspect=HOST:PORT`) adds a debugger.
// Production never runs this: `npm start`, the Dockerfile and the chart run `node dist/main.js`.
// esbuild transpiles only (`npm run typecheck` checks the types); node --watch-path restarts the
// service with SIGTERM (its graceful shutdown) when dist-dev/ changes.
//
// Ctrl-C stops the watcher, which stops the service with one SIGTERM; a second Ctrl-C makes the
// service exit at once (its second-signal rule). The watcher runs in its own process group so
// that the terminal's Ctrl-C reaches the service only through it, once; npm forwards the same
// Ctrl-C to this script a second time, so signals within a moment of the first are one. npm
// forwards SIGINT and SIGTERM to this script (package.json's `exec`); when npm ends without
// forwarding anything (SIGHUP, SIGKILL), this script notices its parent is gone and stops too.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';
import pretty from 'pino-pretty';
import { telemetryBundleOptions } from './build.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');
const OUT = path.join(ROOT, 'dist-dev');
const inspect = process.argv.slice(2).filter((arg) => /^--inspect(-brk|-wait)?(=.*)?$/.test(arg));
const unknown = process.argv.slice(2).filter((arg) => !inspect.includes(arg));
if (unknown.length > 0) {
  console.error(`dev: unknown arguments ${unknown.join(' ')} (only --inspect[=host:port] and --inspect-brk are passed on to node)`);
  process.exit(2);
}

/**
 * Writes a build's output only when the build succeeded, and only the files that changed. esbuild
 * would delete a watched build's output when a rebuild fails (evanw/esbuild#3643): here a build
 * error leaves the last good build, and the service running it, in place (the workaround of
 * https://github.com/evanw/esbuild/issues/4098). And node --watch restarts only for a real change.
 * @type {esbuild.Plugin}
 */
const writeWhenBuilt = {
  name: 'write-when-built',
  setup(build) {
    build.onEnd((result) => {
      if (result.errors.length > 0) return;
      for (const file of result.outputFiles ?? []) {
        if (fs.existsSync(file.path) && fs.readFileSync(file.path).equals(file.contents)) continue;
        fs.mkdirSync(path.dirname(file.path), { recursive: true });
        fs.writeFileSync(file.path, file.contents);
      }
    });
  },
};

fs.rmSync(OUT, { recursive: true, force: true });
const telemetryBundle = telemetryBundleOptions(path.join(ROOT, 'src', 'observability', 'telemetry.ts'), path.join(OUT, 'observability', 'telemetry.bundle.js'));
const builders = await Promise.all([
  esbuild.context({
    absWorkingDir: ROOT,
    entryPoints: ['src/**/*.ts'],
    outdir: OUT,
    outbase: 'src',
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    sourcemap: true,
    logLevel: 'warning',
    write: false,
    plugins: [writeWhenBuilt],
  }),
  esbuild.context({ ...telemetryBundle, write: false, plugins: [...(telemetryBundle.plugins ?? []), writeWhenBuilt] }),
]);
// The first build must exist before node starts; later ones are picked up by node --watch.
await Promise.all(builders.map((builder) => builder.rebuild())).catch(() => process.exit(1));
await Promise.all(builders.map((builder) => builder.watch()));
const stopBuilding = () => Promise.all(builders.map((builder) => builder.dispose()));

const logs = pretty({ colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'service,version', singleLine: true, sync: true });
const watcher = spawn(process.execPath, [...inspect, `--watch-path=${OUT}`, '--watch-preserve-output', path.join(OUT, 'main.js')], {
  cwd: ROOT,
  stdio: ['ignore', 'pipe', 'inherit'],
  detached: true,
});
watcher.stdout.pipe(logs, { end: false });

let stoppingSince;
const stop = (signal) => {
  if (stoppingSince !== undefined && performance.now() - stoppingSince < 500) return;
  stoppingSince = performance.now();
  void stopBuilding();
  if (watcher.exitCode === null) watcher.kill(signal === 'SIGINT' ? 'SIGINT' : 'SIGTERM');
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stop(signal));
const parent = process.ppid;
const parentWatch = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(parentWatch);
  stop('SIGTERM');
}, 500).unref();
// However this script ends, the watcher and the service (its process group) do not outlive it.
process.on('exit', () => {
  if (watcher.exitCode === null && watcher.signalCode === null) process.kill(-watcher.pid, 'SIGKILL');
});
watcher.on('close', (code, signal) => {
  void stopBuilding();
  logs.end(() => process.exit(code ?? (signal === null ? 0 : 1)));
});
