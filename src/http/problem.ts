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

const PROBLEM_CONTENT_TYPE = 'application/problem+json';

function problem(status: number, detail?: string): ProblemDetails {
  const body: ProblemDetails = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status };
  if (detail !== undefined) body.detail = detail;
  return body;
}

/** Anything else thrown becomes a 500. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly detail?: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail ?? STATUS_CODES[status] ?? 'Error');
    this.name = 'HttpProblem';
  }
}

export interface ProblemAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export function problemAnswer(status: number, detail?: string, extraHeaders: Readonly<Record<string, string>> = {}, traceResponse?: string): ProblemAnswer {
  const details = problem(status, detail);
  if (traceResponse !== undefined) details.trace_id = traceIdOf(traceResponse);
  const body = JSON.stringify(details);
  const headers = {
    'Content-Type': PROBLEM_CONTENT_TYPE,
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
