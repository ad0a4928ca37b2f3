/**
 * The entry point: `node dist/main.js` (in `npm start`, the Dockerfile and the Helm chart alike).
 * Telemetry starts first because OpenTelemetry's instrumentations patch http, koa and pino as they
 * are required; the service is loaded only afterwards, and gets the telemetry handle it needs.
 */
import { startTelemetry } from './telemetry';

const telemetry = startTelemetry();
// eslint-disable-next-line @typescript-eslint/no-require-imports -- must be loaded after telemetry has started
const { runService } = require('./server') as typeof import('./server');
void runService(telemetry);
