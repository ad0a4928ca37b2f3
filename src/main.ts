/**
 * The entry point: `node dist/main.js` (in `npm start`, the Dockerfile and the Helm chart alike).
 * Telemetry starts first because OpenTelemetry's instrumentations patch http, koa and pino as they
 * are required; the service (service.ts) is loaded only afterwards, and gets the telemetry handle.
 *
 * Start-up goes into loading the SDK rather than running it, hence:
 * - With tracing on, the SDK and its instrumentations come from one file,
 *   dist/observability/telemetry.bundle.js (scripts/build.mjs), instead of many modules to find and
 *   read. What the service requires itself (koa, @koa/router, pino, node:http,
 *   @opentelemetry/api) is not in it, so the instrumentations still see it being required. With
 *   OTEL_SDK_DISABLED=true it is not read.
 * - Node's compile cache keeps the bytecode of the modules loaded before: in NODE_COMPILE_CACHE
 *   (the image sets a read-only one, filled when the image is built), else in the OS temporary
 *   directory. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
// First, in syntax any Node parses and before anything is required: on an older Node the first
// failure would otherwise be a TypeError far from its cause.
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 15)) {
  process.stderr.write(`product-service needs Node >= 22.15 (found: ${process.version}).\n`);
  process.exit(1);
}

/* eslint-disable @typescript-eslint/no-require-imports -- required in order, after the check above */
const { existsSync } = require('node:fs') as typeof import('node:fs');
const { enableCompileCache } = require('node:module') as typeof import('node:module');
const { join } = require('node:path') as { join: (...paths: string[]) => string };
const { sdkDisabled } = require('./observability/telemetry') as typeof import('./observability/telemetry');

enableCompileCache();

// Run by npm (`npm start`, `npm run dev`), the service stops with npm: npm forwards only SIGINT and
// SIGTERM to its child, so after a SIGHUP or SIGKILL to npm the service would serve on, orphaned.
if (process.env.npm_lifecycle_event !== undefined) {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.kill(process.pid, 'SIGTERM');
  }, 500).unref();
}

const bundle = join(__dirname, 'observability', 'telemetry.bundle.js');
// Both export the same startTelemetry; dist/observability/telemetry.js requires the SDK from
// node_modules, and only when tracing is on (a build by tsc alone has no bundle).
const { startTelemetry } = require(
  !sdkDisabled(process.env) && existsSync(bundle) ? bundle : './observability/telemetry',
) as typeof import('./observability/telemetry');
const telemetry = startTelemetry();
// Loaded only after telemetry has started, so that the instrumentations see what it requires.
const { runService } = require('./service') as typeof import('./service');
void runService(telemetry);
