/**
 * The entry point. Telemetry starts first because the instrumentations patch http, koa and pino as
 * they are required. Start-up time goes into loading the SDK, hence its one-file bundle
 * (scripts/build.mjs) and Node's compile cache.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- required in order: telemetry before the service */
const { existsSync } = require('node:fs') as typeof import('node:fs');
const { enableCompileCache } = require('node:module') as typeof import('node:module');
const { join } = require('node:path') as { join: (...paths: string[]) => string };
const { sdkDisabled } = require('./observability/telemetry') as typeof import('./observability/telemetry');

// Stryker disable next-line CallExpression: without the cache the service starts slower, and does the same.
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
// A build by tsc alone has no bundle.
const { startTelemetry } = require(
  !sdkDisabled(process.env) && existsSync(bundle) ? bundle : './observability/telemetry',
) as typeof import('./observability/telemetry');
const telemetry = startTelemetry();
const { runService } = require('./service') as typeof import('./service');
void runService(telemetry);
