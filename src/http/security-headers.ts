import type { ServerResponse } from 'node:http';

/**
 * Headers every answer carries, from the API and the metrics port alike, errors included (the
 * refusals answered before Koa too: problem.ts adds them).
 * - nosniff: a browser must never guess a type other than the declared one (a problem+json body
 *   rendered as HTML).
 * - no-store: no answer may be kept by a cache. Each id is issued once, and 404 and 405 are
 *   cacheable by default (RFC 9110 §15.1): a CDN or shared proxy in front would serve them to others.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-store' };

export function setSecurityHeaders(res: ServerResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
}
