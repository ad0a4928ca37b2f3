import { STATUS_CODES, type ServerResponse } from 'node:http';
import { SECURITY_HEADERS } from './security-headers';
import { TRACE_RESPONSE, traceIdOf } from './trace-response';

/**
 * RFC 9457, the shape of every error answer. "about:blank": the status says all a client can act
 * on. `trace_id` rather than `instance`, which must be a URI, and no URI scheme names a trace.
 */
interface ProblemDetails {
  type: 'about:blank';
  title: string;
  status: number;
  detail?: string;
  trace_id?: string;
}

/** Anything else thrown becomes a 500. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly detail?: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    // Caught by http/middleware.ts, which answers it: its message is never shown.
    super(detail);
  }
}

export interface ProblemAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export function problemAnswer(status: number, detail?: string, extraHeaders: Readonly<Record<string, string>> = {}, traceResponse?: string): ProblemAnswer {
  const trace_id = traceResponse === undefined ? undefined : traceIdOf(traceResponse);
  // JSON.stringify leaves out the members that are undefined.
  // Stryker disable next-line StringLiteral: every status the service answers has a reason phrase
  const body = JSON.stringify({ type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail, trace_id } satisfies ProblemDetails);
  const headers = {
    'Content-Type': 'application/problem+json',
    'Content-Length': String(Buffer.byteLength(body)),
    ...SECURITY_HEADERS,
    ...(traceResponse === undefined ? {} : { [TRACE_RESPONSE]: traceResponse }),
    ...extraHeaders,
  };
  return { status, headers, body };
}

export function sendProblem(res: ServerResponse, answer: ProblemAnswer): void {
  res.writeHead(answer.status, answer.headers).end(answer.body);
}
