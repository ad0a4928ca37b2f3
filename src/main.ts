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
import { existsSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';
import { sdkDisabled } from './observability/telemetry';

enableCompileCache();

const bundle = join(__dirname, 'observability', 'telemetry.bundle.js');
// Both export the same startTelemetry; dist/observability/telemetry.js requires the SDK from
// node_modules, and only when tracing is on (a build by tsc alone has no bundle).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startTelemetry } = require(
  !sdkDisabled(process.env) && existsSync(bundle) ? bundle : './observability/telemetry',
) as typeof import('./observability/telemetry');
const telemetry = startTelemetry();
// eslint-disable-next-line @typescript-eslint/no-require-imports -- must be loaded after telemetry has started
const { runService } = require('./service') as typeof import('./service');
void runService(telemetry);
