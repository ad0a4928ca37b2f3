'use strict';
// The comparison: OpenTelemetry set up the way the getting-started guides show it; everything
// else is left to the SDK's defaults and the OTEL_* environment, exactly as a user following the
// docs would. Preloaded with `node --require`.
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { getNodeAutoInstrumentations } = require('@opentelemetry/auto-instrumentations-node');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');

const sdk = new NodeSDK({
  traceExporter: new OTLPTraceExporter(),
  instrumentations: [getNodeAutoInstrumentations()],
});

sdk.start();

process.on('SIGTERM', () => {
  sdk
    .shutdown()
    .catch((err) => console.error('Error shutting down SDK', err))
    .finally(() => process.exit(0));
});
