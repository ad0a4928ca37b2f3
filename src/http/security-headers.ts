import type { ServerResponse } from 'node:http';

/**
 * Headers every answer carries, from the API and the metrics port alike, errors included.
 * nosniff: a browser must never guess a type other than the declared one (a problem+json body
 * rendered as HTML).
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { 'X-Content-Type-Options': 'nosniff' };

export function setSecurityHeaders(res: ServerResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
}
