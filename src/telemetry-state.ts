/**
 * What the telemetry preload (telemetry.ts) shares with the application: counts of what happened
 * to finished spans, read by the metrics endpoint, and the function that flushes and stops the
 * trace pipeline, called by the graceful shutdown. They meet in this module because the preload
 * runs before the application exists; both sides require this same file, so they share its state.
 */

export const telemetryState = {
  /** True once the preload has set up tracing (not under OTEL_SDK_DISABLED, nor without the preload). */
  tracingEnabled: false,
};

/** Plain numbers: incrementing them costs nothing on the request path. */
export const spanExportStats = {
  /** Spans accepted into the export queue. */
  queued: 0,
  /** Spans dropped because the export queue was full (the collector is down or too slow). */
  droppedQueueFull: 0,
  /** Spans the collector accepted. */
  exported: 0,
  /** Spans in export batches that failed (connection refused, error status, timeout). */
  exportFailed: 0,
  /** Spans waiting in the queue right now, and how many it holds at most. */
  queueSize: 0,
  queueCapacity: 0,
};

let shutdownTelemetryHook: (() => Promise<void>) | undefined;

/** Called once by the preload when it has started the SDK. */
export function onTelemetryShutdown(hook: () => Promise<void>): void {
  shutdownTelemetryHook = hook;
}

/** Flushes spans still queued and stops the SDK; resolves at once when no telemetry was started. */
export async function shutdownTelemetry(): Promise<void> {
  await shutdownTelemetryHook?.();
}
