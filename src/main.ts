/**
 * The entry point. Telemetry starts first because the instrumentations patch http, koa and pino as
 * they are required. Start-up time goes into loading the SDK, hence its one-file bundle
 * (scripts/build.mjs) and Node's compile cache.
 */
// In syntax any Node parses: on an older Node the first failure would otherwise be a TypeError far from its cause.
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
// A build by tsc alone has no bundle.
const { startTelemetry } = require(
  !sdkDisabled(process.env) && existsSync(bundle) ? bundle : './observability/telemetry',
) as typeof import('./observability/telemetry');
const telemetry = startTelemetry();
const { runService } = require('./service') as typeof import('./service');
void runService(telemetry);
