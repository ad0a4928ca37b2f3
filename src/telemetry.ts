/**
 * Telemetry bootstrap, preloaded before any application module:
 *   node --require ./dist/telemetry.js dist/server.js
 * (in `npm start`, the Dockerfile and the Helm chart alike), so that tracing is in place before
 * the first request. Configured only through the standard OTEL_* variables (see tracing.ts).
 * Metrics are served by prom-client and logs go to stdout, so neither is sent over OTLP.
 *
 * OTEL_SDK_DISABLED=true loads nothing at all: the SDK is required only when it is used.
 */
if (process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when tracing is on
  (require('./tracing') as typeof import('./tracing')).startTracing();
}
