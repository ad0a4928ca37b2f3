import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { spanExportStats } from './telemetry-state';

/**
 * Wraps the exporter to count spans exported and spans whose export failed, and tells the
 * queue counter below when spans leave the queue. Public SpanExporter interface only.
 */
export class CountingSpanExporter implements SpanExporter {
  private inner: SpanExporter | undefined;

  constructor(
    /** Creates the real exporter at the first export: loading it is kept off the start-up path. */
    private readonly createInner: () => SpanExporter,
    private readonly onTakenFromQueue: (count: number) => void,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.onTakenFromQueue(spans.length);
    this.inner ??= this.createInner();
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) spanExportStats.exported += spans.length;
      else spanExportStats.exportFailed += spans.length;
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner?.shutdown() ?? Promise.resolve();
  }

  forceFlush(): Promise<void> {
    return this.inner?.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * Wraps the BatchSpanProcessor to count spans queued and spans dropped because the queue was full.
 * The batch processor drops silently (one debug line); this mirrors its rule (a sampled span is
 * dropped when `capacity` spans are already waiting) from the outside, with the exporter wrapper
 * reporting the spans it takes out of the queue.
 */
export class CountingSpanProcessor implements SpanProcessor {
  constructor(
    private readonly inner: SpanProcessor,
    private readonly capacity: number,
  ) {
    spanExportStats.queueCapacity = capacity;
  }

  /** For the exporter wrapper: `count` spans left the queue for an export. */
  readonly takenFromQueue = (count: number): void => {
    spanExportStats.queueSize = Math.max(0, spanExportStats.queueSize - count);
  };

  onStart(span: Span, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & 1) === 1) {
      if (spanExportStats.queueSize >= this.capacity) {
        spanExportStats.droppedQueueFull += 1;
      } else {
        spanExportStats.queueSize += 1;
        spanExportStats.queued += 1;
      }
    }
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}
