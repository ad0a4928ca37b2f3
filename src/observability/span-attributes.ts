/**
 * What a server span may say about its request. instrumentation-http records the whole query, the
 * path of every request (a scanner's `/reset/tok_...` too) and addresses from headers any client
 * writes; which parameters are safe and which proxies are trusted only the operator knows.
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import type { Attributes } from '@opentelemetry/api';
import type { AddressRange } from '../config';
import { requestTarget } from '../request-target';

export const REDACTED = 'REDACTED';

export interface SpanAttributeRules {
  routed(request: IncomingMessage): boolean;
  queryParams: readonly string[];
  trustedProxies: readonly AddressRange[];
}

export function createSpanAttributes(rules: SpanAttributeRules): (request: IncomingMessage) => Attributes {
  const kept = new Set(rules.queryParams);
  const trusted = blockListOf(rules.trustedProxies);
  return (request) => {
    const { socket } = request;
    const attributes: Attributes = {
      'client.address': clientAddress(socket.remoteAddress, request.headers['x-forwarded-for'], trusted),
      'server.address': socket.localAddress,
      'server.port': socket.localPort,
    };
    // Undefined removes the attribute.
    const target = requestTarget(request);
    attributes['url.path'] = rules.routed(request) && 'path' in target ? target.path : undefined;
    attributes['url.query'] = 'path' in target && target.query !== undefined ? redactQuery(target.query, kept) : undefined;
    return attributes;
  };
}

/** Names are redacted too: a client chooses them as freely as values (a bare `?tok_...`). */
export function redactQuery(query: string, kept: ReadonlySet<string>): string {
  const pairs: string[] = [];
  for (const [name, value] of new URLSearchParams(query)) {
    pairs.push(kept.has(name) ? new URLSearchParams([[name, value]]).toString() : REDACTED);
  }
  return pairs.join('&');
}

/**
 * The socket's peer, or behind trusted proxies the first X-Forwarded-For address from its end that
 * is not a trusted proxy's (nginx's real_ip_recursive): what lies further was written by the client.
 * By hand: Koa's ctx.ips believes any peer once app.proxy is set, and proxy-addr returns an entry
 * with a port, or no address at all, as the client.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: BlockList | undefined): string | undefined {
  if (peer === undefined || trusted === undefined || forwardedFor === undefined || !isTrusted(trusted, peer)) return peer;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let client = peer;
  for (const entry of hops.reverse()) {
    const hop = addressOf(entry.trim());
    if (hop === undefined) break;
    client = hop;
    if (!isTrusted(trusted, hop)) break;
  }
  return client;
}

function isTrusted(trusted: BlockList, address: string): boolean {
  return trusted.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

/** Some proxies write a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`). */
function addressOf(entry: string): string | undefined {
  if (isIP(entry) !== 0) return entry;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry)?.[1];
  if (bracketed !== undefined) return isIP(bracketed) === 6 ? bracketed : undefined;
  const withPort = /^([\d.]+):\d+$/.exec(entry)?.[1];
  return withPort !== undefined && isIP(withPort) === 4 ? withPort : undefined;
}

/** Undefined when no proxy is trusted. */
function blockListOf(ranges: readonly AddressRange[]): BlockList | undefined {
  if (ranges.length === 0) return undefined;
  const list = new BlockList();
  for (const { address, prefix, family } of ranges) list.addSubnet(address, prefix, family);
  return list;
}

/** Whether a request's peer is in `ranges` (never, for none). */
export function fromPeers(ranges: readonly AddressRange[]): (request: IncomingMessage) => boolean {
  const trusted = blockListOf(ranges);
  return ({ socket }) => trusted !== undefined && socket.remoteAddress !== undefined && isTrusted(trusted, socket.remoteAddress);
}
