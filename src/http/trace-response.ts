/**
 * The id every answer carries, so that a caller can quote its request: W3C Trace Context Level 2's
 * `traceresponse`. It names the server span when spans are made (an exporter set); otherwise (no
 * exporter, the chart's default; a probe; a refusal; OTEL_SDK_DISABLED) the trace id is a trusted
 * proxy's traceparent's (telemetry.ts drops any other caller's) or random, the span id random, unsampled.
 */
import { randomUUID } from 'node:crypto';
import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';

export const TRACE_RESPONSE = 'traceresponse';

export function traceResponse(): string {
  const span = trace.getActiveSpan()?.spanContext();
  const valid = span !== undefined && isSpanContextValid(span);
  // A remote context is the caller's own span, propagated: no span of this service's.
  if (valid && span.isRemote !== true) return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`;
  return `00-${valid ? span.traceId : randomHex()}-${randomHex().slice(16)}-00`;
}

/** 32 hex digits, never all zero (digit 13 is the version, 4; digit 17, where `.slice(16)` starts, the variant, 8-b): Node draws randomUUID's bytes ahead in a cache, as a call into the CSPRNG costs far more than the bytes it returns. */
const randomHex = (): string => randomUUID().replaceAll('-', '');

export const traceIdOf = (traceResponseValue: string): string => traceResponseValue.slice(3, 35);
