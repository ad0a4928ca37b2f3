// Runs: src in-process; pure functions, and a plain node:http server for the request target.
//
// The rules behind what a server span records (src/observability/span-attributes.ts), over the
// forms real proxies and clients write. test/telemetry.test.ts proves the same rules on the spans
// the built service exports.
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import { BlockList, type AddressInfo } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { parseConfig } from '../src/config';
import { clientAddress, createSpanAttributes, redactQuery, REDACTED } from '../src/observability/span-attributes';
import { rawExchange } from './support/raw-http';

/** The BlockList the service builds from TRUSTED_PROXIES. */
function trustedList(variable: string): BlockList {
  const list = new BlockList();
  for (const { address, prefix, family } of parseConfig({ TRUSTED_PROXIES: variable }).trustedProxies) list.addSubnet(address, prefix, family);
  return list;
}

describe('clientAddress', () => {
  const trusted = trustedList('10.0.0.0/8, fd00::/8, 192.0.2.1');

  it.each<[peer: string, forwardedFor: string | string[] | undefined, expected: string]>([
    // The peer is not a trusted proxy: whatever it says about others is its own invention.
    ['203.0.113.5', '198.51.100.7', '203.0.113.5'],
    ['10.1.2.3', undefined, '10.1.2.3'],
    ['10.1.2.3', '198.51.100.7', '198.51.100.7'],
    ['10.1.2.3', '203.0.113.66, 198.51.100.7', '198.51.100.7'],
    ['10.1.2.3', '198.51.100.7, 10.9.9.9, 192.0.2.1', '198.51.100.7'],
    // Every hop trusted: the first one, the furthest the proxies can vouch for.
    ['10.1.2.3', '10.2.2.2, 10.3.3.3', '10.2.2.2'],
    // Ports, as Azure's and some other proxies write them.
    ['10.1.2.3', '198.51.100.7:4711', '198.51.100.7'],
    ['10.1.2.3', '[2001:db8::7]:4711', '2001:db8::7'],
    ['10.1.2.3', '2001:db8::7', '2001:db8::7'],
    ['10.1.2.3', '[2001:db8::7]', '2001:db8::7'],
    // IPv6 proxies, and an IPv4 proxy seen through a dual-stack listener.
    ['fd00::1', '198.51.100.7', '198.51.100.7'],
    ['::ffff:10.1.2.3', '198.51.100.7', '198.51.100.7'],
    // Not an address: the walk stops at the last trusted hop.
    ['10.1.2.3', 'unknown', '10.1.2.3'],
    ['10.1.2.3', '198.51.100.7, _hidden, 10.4.4.4', '10.4.4.4'],
    ['10.1.2.3', '', '10.1.2.3'],
    // Only a whole entry is an address, with a port if any: anything around it makes it none.
    ['10.1.2.3', 'x[2001:db8::7]:4711', '10.1.2.3'],
    ['10.1.2.3', '[2001:db8::7]:47x', '10.1.2.3'],
    ['10.1.2.3', '[not-an-address]', '10.1.2.3'],
    ['10.1.2.3', 'x198.51.100.7:4711', '10.1.2.3'],
    ['10.1.2.3', '198.51.100.7:47x', '10.1.2.3'],
    ['10.1.2.3', '999.51.100.7:4711', '10.1.2.3'],
    ['10.1.2.3', ['203.0.113.66', '198.51.100.7'], '198.51.100.7'],
  ])('peer %s, X-Forwarded-For %j: %s', (peer, forwardedFor, expected) => {
    expect(clientAddress(peer, forwardedFor, trusted)).toBe(expected);
  });

  it('without trusted proxies, the peer whatever the header says; without a peer (the socket is gone), none', () => {
    expect(clientAddress('10.1.2.3', '198.51.100.7', undefined)).toBe('10.1.2.3');
    expect(clientAddress(undefined, '198.51.100.7', trusted)).toBeUndefined();
  });
});

describe('redactQuery', () => {
  it.each([
    ['access_token=abc&page=2', ['page'], `${REDACTED}&page=2`],
    ['page=2&page=3', ['page'], 'page=2&page=3'],
    ['tok_secret', [], REDACTED],
    ['a=1&b=2&c', [], `${REDACTED}&${REDACTED}&${REDACTED}`],
    ['q=caf%C3%A9%20noir&x=%ZZ', ['q'], `q=caf%C3%A9+noir&${REDACTED}`],
    ['Page=2', ['page'], REDACTED],
    ['', ['page'], ''],
  ])('%j keeping %j: %j', (query, kept, expected) => {
    expect(redactQuery(query, new Set(kept))).toBe(expected);
  });
});

describe('url.path and url.query, from the request target as Node received it', () => {
  const attributesOf = createSpanAttributes({ routed: () => true, queryParams: ['page'], trustedProxies: [] });

  it.each<[target: string, path: string, query: string | undefined]>([
    ['/product?page=2&tok_live=1', '/product', `page=2&${REDACTED}`],
    ['/product', '/product', undefined],
    ['/product?', '/product', ''],
    // Absolute form (RFC 9112 §3.2.2): the path it is served at; the host it names is no attribute.
    ['http://forged.example/product?tok_live=1&page=2', '/product', `${REDACTED}&page=2`],
    ['HTTPS://forged.example:4443', '/', undefined],
    ['http://forged.example/product/', '/product/', undefined],
  ])('%s: url.path %s, url.query %s', async (target, path, query) => {
    const seen: IncomingMessage[] = [];
    const server = createServer((req, res) => {
      seen.push(req);
      res.end();
    });
    onTestFinished(() => void server.close());
    await once(server.listen(0, '127.0.0.1'), 'listening');
    await rawExchange((server.address() as AddressInfo).port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(seen).toHaveLength(1);
    expect(attributesOf(seen[0] as IncomingMessage)).toMatchObject({ 'url.path': path, 'url.query': query });
  });
});
