/**
 * The id every answer carries, so that a caller can quote the one request it made: W3C Trace
 * Context Level 2's `traceresponse` header (version-traceid-spanid-flags). It names the request's
 * server span, which exists whether or not spans are exported (telemetry.ts); a request without
 * one (a probe, a refusal before the span, OTEL_SDK_DISABLED) gets random ids of the same shape,
 * unsampled. Its trace id is the `trace_id` of the request's log lines and of its problem answer.
 */
import { randomBytes } from 'node:crypto';
import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';

export const TRACE_RESPONSE = 'traceresponse';

/** The traceresponse of the request being served, from the active span when there is one. */
export function traceResponse(): string {
  const span = trace.getActiveSpan()?.spanContext();
  if (span !== undefined && isSpanContextValid(span)) {
    return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`;
  }
  const ids = randomBytes(24).toString('hex');
  return `00-${ids.slice(0, 32)}-${ids.slice(32)}-00`;
}

/** The trace id of a traceresponse value. */
export const traceIdOf = (traceResponseValue: string): string => traceResponseValue.slice(3, 35);
