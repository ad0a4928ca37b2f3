/**
 * The entry point: `node dist/main.js` (in `npm start`, the Dockerfile and the Helm chart alike).
 * Telemetry starts first because OpenTelemetry's instrumentations patch http, koa and pino as they
 * are required; the service is loaded only afterwards, and gets the telemetry handle it needs.
 *
 * Start-up time (issue #11) goes into loading the SDK, not running it, hence two things first:
 * - Node's compile cache: a module loaded before is not compiled again. Its directory is
 *   NODE_COMPILE_CACHE when set (the image points it at a cache built into the image), otherwise
 *   node-compile-cache in the OS temporary directory. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 * - With tracing on, the SDK and its instrumentations come from dist/telemetry.bundle.js (built
 *   by scripts/build.mjs from dist/telemetry.js): one file instead of ~1,000 modules looked up
 *   and read one by one. What the service itself requires (koa, @koa/router, pino, node:http,
 *   @opentelemetry/api, ...) is not in it, so the instrumentations still see it being required
 *   and patch it. With OTEL_SDK_DISABLED=true the bundle is not loaded at all.
 */
import { existsSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';

enableCompileCache();

const telemetry = loadTelemetry().startTelemetry();
// eslint-disable-next-line @typescript-eslint/no-require-imports -- must be loaded after telemetry has started
const { runService } = require('./server') as typeof import('./server');
void runService(telemetry);

/** The bundle when tracing may be on and it was built; otherwise the compiled module alone. */
function loadTelemetry(): typeof import('./telemetry') {
  const disabled = process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true';
  const bundle = join(__dirname, 'telemetry.bundle.js');
  // Both export the same startTelemetry; the unbundled one requires the SDK from node_modules.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(!disabled && existsSync(bundle) ? bundle : './telemetry') as typeof import('./telemetry');
}
