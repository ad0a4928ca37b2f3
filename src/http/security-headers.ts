/**
 * On every answer of both ports (server.ts; problem.ts for refusals). nosniff: no problem+json
 * rendered as HTML. no-store: each id is issued once, and 404 and 405 are cacheable by default
 * (RFC 9110 §15.1).
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-store' };
