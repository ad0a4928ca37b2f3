/**
 * The id every answer carries, so that a caller can quote the one request it made: W3C Trace
 * Context Level 2's `traceresponse` header (version-traceid-spanid-flags). With spans made (an
 * exporter set), it names the request's server span. Otherwise (no exporter, the chart's default;
 * a probe; a refusal before the span; OTEL_SDK_DISABLED) the trace id is a trusted proxy's when its
 * traceparent was read (telemetry.ts drops any other caller's), else random, and the span id random, unsampled. Its trace id is the
 * `trace_id` of the request's log lines and of its problem answer.
 */
import { randomBytes } from 'node:crypto';
import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';

export const TRACE_RESPONSE = 'traceresponse';

/** The traceresponse of the request being served. */
export function traceResponse(): string {
  const span = trace.getActiveSpan()?.spanContext();
  const valid = span !== undefined && isSpanContextValid(span);
  // A remote context is the caller's own span, propagated: no span of this service's.
  if (valid && span.isRemote !== true) return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`;
  const ids = randomIds();
  return `00-${valid ? span.traceId : ids.slice(0, 32)}-${ids.slice(32)}-00`;
}

/** How many answers' ids one call into the CSPRNG draws: each call costs far more than the bytes it returns. */
const IDS_PER_DRAW = 256;
let drawn = '';
let next = 0;

/** 48 random hex digits (a trace id and a span id), taken from a batch drawn ahead. */
function randomIds(): string {
  if (next === drawn.length) {
    drawn = randomBytes(24 * IDS_PER_DRAW).toString('hex');
    next = 0;
  }
  next += 48;
  return drawn.slice(next - 48, next);
}

/** The trace id of a traceresponse value. */
export const traceIdOf = (traceResponseValue: string): string => traceResponseValue.slice(3, 35);
