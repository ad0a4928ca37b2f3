import type { IncomingMessage } from 'node:http';

export type RequestTarget = { path: string; query: string | undefined } | { refused: string };

/** RFC 9112 §3.2.2 */
const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/[^/?#]*)?([^?#]*)(?:\?([^#]*))?/;

const parsed = new WeakMap<IncomingMessage, RequestTarget>();

/** Parsed once, so that the span hooks, the server, Koa and the metrics port all see the same path. */
export function requestTarget(req: IncomingMessage): RequestTarget {
  let target = parsed.get(req);
  // Stryker disable next-line ConditionalExpression: parsing again gives the same target (the server rewrites an absolute-form url to that target's path and query)
  if (target === undefined) {
    // Stryker disable next-line StringLiteral: a server's request always has a url
    target = parse(req.url ?? '/');
    // Stryker disable next-line CallExpression: as above, parsing again gives the same target
    parsed.set(req, target);
  }
  return target;
}

function parse(url: string): RequestTarget {
  const absolute = url.startsWith('/') ? null : ABSOLUTE_FORM.exec(url);
  if (absolute !== null) {
    // Stryker disable next-line StringLiteral: both groups take part in every match, so the defaults never apply
    const [form, scheme = '', path = ''] = absolute;
    // Stryker disable next-line StringLiteral: Node's parser lets through no target led by a scheme without //
    if (!/^https?$/i.test(scheme) || !form.startsWith(`${scheme}://`)) {
      return { refused: 'Only origin-form request targets (/path) and absolute-form http:// or https:// targets are served.' };
    }
    return { path: path === '' ? '/' : path, query: absolute[3] };
  }
  const queryAt = url.indexOf('?');
  // Stryker disable next-line EqualityOperator: a target led by ? never gets here, Node's parser refuses it
  return queryAt < 0 ? { path: url, query: undefined } : { path: url.slice(0, queryAt), query: url.slice(queryAt + 1) };
}
