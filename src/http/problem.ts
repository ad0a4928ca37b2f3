import { STATUS_CODES, type ServerResponse } from 'node:http';
import { SECURITY_HEADERS } from './security-headers';
import { TRACE_RESPONSE, traceIdOf } from './trace-response';

/**
 * RFC 9457 problem details: the one shape of every error answer this service gives.
 * `type` is "about:blank" because the HTTP status already says everything a client can act on;
 * the RFC then asks that `title` be the status phrase. `trace_id`, an extension member, is the id
 * of the request (its traceresponse header's), under the name its log lines give it: the one thing
 * to quote. Not `instance`, which must be a URI, and no URI scheme names a trace.
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

/** An error that carries the status and the detail to answer with. Anything else thrown becomes a 500. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly detail?: string,
    /** Headers the answer needs, e.g. `Connection: close` after an unread body. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail ?? STATUS_CODES[status] ?? 'Error');
    this.name = 'HttpProblem';
  }
}

/** A problem answer written outside Koa: its body and every header it needs. */
export interface ProblemAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** The answer; with `traceResponse` (trace-response.ts), the request's id in its header and in the body's trace_id. */
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

/** Writes a problem answer on a Node response that nothing has written to yet. */
export function sendProblem(res: ServerResponse, answer: ProblemAnswer): void {
  res.writeHead(answer.status, answer.headers).end(answer.body);
}
