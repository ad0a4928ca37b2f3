/**
 * The id every answer carries, so that a caller can quote its request: W3C Trace Context Level 2's
 * `traceresponse`. It names the server span when spans are made (an exporter set); otherwise (no
 * exporter, the chart's default; a probe; a refusal; OTEL_SDK_DISABLED) the trace id is a trusted
 * proxy's traceparent's (telemetry.ts drops any other caller's) or random, the span id random, unsampled.
 */
import { randomBytes } from 'node:crypto';
import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';

export const TRACE_RESPONSE = 'traceresponse';

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

export const traceIdOf = (traceResponseValue: string): string => traceResponseValue.slice(3, 35);
