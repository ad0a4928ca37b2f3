/**
 * What the server span of a request may say about it. instrumentation-http fills the span from the
 * request as the client sent it: the whole query string (it redacts only a few cloud signature
 * parameters), the path of every request (a scanner's `/reset/tok_...` as well), client.address
 * from a `Forwarded` or `X-Forwarded-For` header and server.address from `Forwarded`,
 * `X-Forwarded-Host` or `Host`, all of which any client writes. Its startIncomingSpanHook
 * (telemetry.ts) gives the span these attributes instead, before the span starts. This is the
 * service's own policy, hence hand-written: which parameters are safe to keep and which proxies
 * are trusted are facts only its operator knows.
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import type { Attributes } from '@opentelemetry/api';
import type { AddressRange } from '../config';
import { requestTarget } from '../http/request-target';

/** What a query parameter that is not kept becomes, name and value alike: OpenTelemetry's word for a redacted value. */
export const REDACTED = 'REDACTED';

export interface SpanAttributeRules {
  /** Whether the request's path is one of the service's routes (routes.ts): only then does the span record it. */
  routed(request: IncomingMessage): boolean;
  /** Query parameters recorded as sent (TRACE_QUERY_PARAMS). */
  queryParams: readonly string[];
  /** Proxies whose X-Forwarded-For is believed (TRUSTED_PROXIES). */
  trustedProxies: readonly AddressRange[];
}

/** The attributes that replace instrumentation-http's own on each server span; the others are left as it sets them. */
export function createSpanAttributes(rules: SpanAttributeRules): (request: IncomingMessage) => Attributes {
  const kept = new Set(rules.queryParams);
  const trusted = rules.trustedProxies.length === 0 ? undefined : new BlockList();
  for (const { address, prefix, family } of rules.trustedProxies) trusted?.addSubnet(address, prefix, family);
  return (request) => {
    const { socket } = request;
    const attributes: Attributes = {
      'client.address': clientAddress(socket.remoteAddress, request.headers['x-forwarded-for'], trusted),
      // The address and port the connection came in on: what the server is, as far as it knows itself.
      'server.address': socket.localAddress,
      'server.port': socket.localPort,
    };
    // The path and query as the server serves them (an absolute-form target's too); undefined
    // removes the attribute: the SDK drops attributes without a value.
    const target = requestTarget(request);
    attributes['url.path'] = rules.routed(request) && 'path' in target ? target.path : undefined;
    attributes['url.query'] = 'path' in target && target.query !== undefined ? redactQuery(target.query, kept) : undefined;
    return attributes;
  };
}

/**
 * The query with each parameter not in `kept` replaced by REDACTED, name included: a client
 * chooses names as freely as values (a token sent as a bare `?tok_...`).
 */
export function redactQuery(query: string, kept: ReadonlySet<string>): string {
  const pairs: string[] = [];
  for (const [name, value] of new URLSearchParams(query)) {
    pairs.push(kept.has(name) ? new URLSearchParams([[name, value]]).toString() : REDACTED);
  }
  return pairs.join('&');
}

/**
 * The address of the client: the socket's peer, unless the peer is a trusted proxy. Then
 * X-Forwarded-For is read from its end, where each trusted proxy appended the address it received
 * the request from, and the first address that is not a trusted proxy's is the client (nginx's
 * real_ip_recursive). What is left of it, further on, was written by the client and is ignored.
 * An entry that is not an address stops the walk at the last trusted proxy.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: BlockList | undefined): string | undefined {
  if (peer === undefined || trusted === undefined || forwardedFor === undefined || !isTrusted(trusted, peer)) return peer;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i -= 1) {
    const hop = addressOf(hops[i]?.trim() ?? '');
    if (hop === undefined) break;
    client = hop;
    if (!isTrusted(trusted, hop)) break;
  }
  return client;
}

function isTrusted(trusted: BlockList, address: string): boolean {
  return trusted.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

/** The IP address of an X-Forwarded-For entry, which some proxies write with a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`). */
function addressOf(entry: string): string | undefined {
  if (isIP(entry) !== 0) return entry;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry)?.[1];
  if (bracketed !== undefined) return isIP(bracketed) === 6 ? bracketed : undefined;
  const withPort = /^([\d.]+):\d+$/.exec(entry)?.[1];
  return withPort !== undefined && isIP(withPort) === 4 ? withPort : undefined;
}

/** Whether a request came straight from a proxy named in TRUSTED_PROXIES (only its trace context is believed: telemetry.ts). */
export function fromTrustedProxy(ranges: readonly AddressRange[]): (request: IncomingMessage) => boolean {
  const trusted = new BlockList();
  for (const { address, prefix, family } of ranges) trusted.addSubnet(address, prefix, family);
  return ({ socket }) => ranges.length > 0 && socket.remoteAddress !== undefined && isTrusted(trusted, socket.remoteAddress);
}
