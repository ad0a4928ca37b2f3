// The hostile run's load workers, each run as its own process pinned to the load core (harness.mjs,
// runWorker), so that generating load does not slow down the harness's probes and samplers.
//
// Usage: node bench/hostile/workers.mjs KIND '{"port":8080,...}'   -> prints HOSTILE_WORKER {...}
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { settleOnce } from './clients.mjs';

const WORKERS = {
  /** A loop ends early when its connection is refused (the listener closed). */
  async keepalive(o) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
    const filler = o.userAgentBytes ? crypto.randomBytes(o.userAgentBytes).toString('base64').slice(0, o.userAgentBytes) : undefined;
    const statuses = {};
    const errors = {};
    let refused = 0;
    let sent = 0;
    const end = Date.now() + o.seconds * 1000;
    const body = '{"name":"hostile"}';
    const post = (onRequest) =>
      new Promise((resolve, reject) => {
        const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
        // A distinct value per request, as distinct clients would send.
        if (filler) headers['user-agent'] = `${sent}-${filler}`.slice(0, o.userAgentBytes);
        sent++;
        const req = http.request({ host: '127.0.0.1', port: o.port, method: 'POST', path: '/product', agent, headers, timeout: 10_000 }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
          res.on('error', reject);
        });
        onRequest(req);
        req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
        req.on('error', reject);
        req.end(body);
      });
    const loop = async () => {
      while (Date.now() < end) {
        let req;
        try {
          const status = await post((r) => {
            req = r;
          });
          statuses[status] = (statuses[status] ?? 0) + 1;
        } catch (err) {
          if (err.code === 'ECONNREFUSED') {
            refused++;
            return;
          }
          // Whether the request went on a connection kept alive from an earlier answer, or a new one.
          const key = `${err.code ?? err.message} on a ${req?.reusedSocket ? 'kept-alive' : 'new'} connection`;
          errors[key] = (errors[key] ?? 0) + 1;
          await sleep(10);
        }
      }
    };
    await Promise.all(Array.from({ length: o.connections }, loop));
    agent.destroy();
    const ok = statuses[201] ?? 0;
    const all = Object.values(statuses).reduce((a, b) => a + b, 0) + Object.values(errors).reduce((a, b) => a + b, 0);
    return { sent, ok, statuses, errors, refused, failed: all - ok };
  },

  async 'pipeline-flood'(o) {
    const burst = Buffer.from('POST /product HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n'.repeat(256));
    const perBurst = 256;
    const end = Date.now() + o.seconds * 1000;
    let opened = 0;
    let closedByServer = 0;
    let bursts = 0;
    const connection = () => {
      const socket = net.connect(o.port, '127.0.0.1');
      socket.pause(); // before connecting: not a byte of the answers is ever read
      opened++;
      const { ended, finish, finished } = settleOnce(socket, Math.max(0, end - Date.now()), false, (byServer) => {
        if (byServer) closedByServer++;
      });
      const pump = () => {
        while (!finished()) {
          bursts++;
          if (!socket.write(burst)) return;
        }
      };
      socket.on('connect', pump);
      socket.on('drain', pump);
      socket.on('error', () => finish(true));
      socket.on('close', () => finish(true));
      return ended;
    };
    const loop = async () => {
      do await connection();
      while (o.reconnect && Date.now() < end);
    };
    await Promise.all(Array.from({ length: o.connections }, loop));
    return { opened, closedByServer, requestsWritten: bursts * perBurst, bytesWritten: bursts * burst.length };
  },
};

const [kind, options] = process.argv.slice(2);
const result = await WORKERS[kind](JSON.parse(options));
process.stdout.write(`HOSTILE_WORKER ${JSON.stringify(result)}\n`);
process.exit(0);
