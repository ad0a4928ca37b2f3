import type { IncomingMessage } from 'node:http';

/** A request's target as the service serves it: the path and the query (without its `?`), or why it is not served. */
export type RequestTarget = { path: string; query: string | undefined } | { refused: string };

/** An absolute-form target (RFC 9112 §3.2.2): a scheme, then for http and https an authority, then the path and query. */
const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/[^/?#]*)?([^?#]*)(?:\?([^#]*))?/;

const parsed = new WeakMap<IncomingMessage, RequestTarget>();

/**
 * The target of `req`, parsed once and remembered: the span hooks (which run before the server's
 * listener), the server and, through the origin-form it writes back into `req.url`, Koa and the
 * metrics port all see the same path. Only http and https absolute-form targets are served.
 */
export function requestTarget(req: IncomingMessage): RequestTarget {
  let target = parsed.get(req);
  if (target === undefined) {
    target = parse(req.url ?? '/');
    parsed.set(req, target);
  }
  return target;
}

function parse(url: string): RequestTarget {
  const absolute = url.startsWith('/') ? null : ABSOLUTE_FORM.exec(url);
  if (absolute !== null) {
    const [form, scheme = '', path = ''] = absolute;
    if (!/^https?$/i.test(scheme) || !form.startsWith(`${scheme}://`)) {
      return { refused: 'Only origin-form request targets (/path) and absolute-form http:// or https:// targets are served.' };
    }
    return { path: path === '' ? '/' : path, query: absolute[3] };
  }
  const queryAt = url.indexOf('?');
  return queryAt < 0 ? { path: url, query: undefined } : { path: url.slice(0, queryAt), query: url.slice(queryAt + 1) };
}
