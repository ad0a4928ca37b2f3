// Open-loop load at a fixed rate, for the latency goal ("p99 at half the maximum throughput").
//
// Why not autocannon's `overallRate`: it gives each connection a per-second budget and sends
// that budget as fast as it can at the start of every second, so the server sees bursts at
// full speed, not a steady rate; and it records whole milliseconds. wrk2 is not packaged by
// Debian. This generator sends request i at the intended time t0 + i/rate over a pool of
// keep-alive connections (HTTP/1.1, one request in flight per connection) and measures
// latency from the *intended* send time, so a stalled server cannot hide its stalls by slowing
// the load down (coordinated omission). The time from the actual send is reported as well.
//
// Usage: node bench/load-open.mjs '{"port":8080,"path":"/product","rate":5000,"duration":10,"connections":64}'
// Prints one line: OPENLOOP_JSON {...}
import net from 'node:net';
import { setImmediate } from 'node:timers';

const o = JSON.parse(process.argv[2]);
const body = '{"name":"bench","price":1}';
const request = Buffer.from(
  `POST ${o.path ?? '/product'} HTTP/1.1\r\nHost: 127.0.0.1:${o.port}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
);
const total = Math.round(o.rate * o.duration);
const interval = 1000 / o.rate;
const fromIntended = new Float64Array(total);
const intendedAt = new Float64Array(total); // when each answered request was due, to place a stall in time
// How late this generator took each request off its schedule (its own delay, not the server's: a
// request waiting for a free connection is already taken). Latency counts from the intended time,
// so a late generator adds to it: that, not how long this thread waited for a CPU, is its share.
const late = new Float64Array(total);
let completed = 0;
let non2xx = 0;
let socketErrors = 0;
let lost = 0;
let stopping = false;
const backlog = []; // intended send times waiting for a free connection
const free = [];

class Connection {
  constructor() {
    this.inflight = null; // { intended }
    this.buf = Buffer.alloc(0);
    this.socket = net.connect({ host: '127.0.0.1', port: o.port, noDelay: true });
    this.ready = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.on('data', (chunk) => this.onData(chunk));
    this.socket.on('error', () => {
      socketErrors++;
    });
    // A server may close a connection (idle timeout, error): its request is lost, and a new
    // connection takes its place in the pool.
    this.socket.on('close', () => {
      if (stopping) return;
      const i = free.indexOf(this);
      if (i >= 0) free.splice(i, 1);
      if (this.inflight) lost++;
      const next = new Connection();
      connections[connections.indexOf(this)] = next;
      next.ready.then(
        () => next.release(),
        () => {
          socketErrors++;
        },
      );
    });
  }

  release() {
    if (backlog.length) this.send(backlog.shift());
    else free.push(this);
  }

  send(intended) {
    this.inflight = { intended };
    this.socket.write(request);
  }

  onData(chunk) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      const headEnd = this.buf.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const head = this.buf.toString('latin1', 0, headEnd);
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      if (!length) throw new Error(`response without Content-Length:\n${head}`);
      const end = headEnd + 4 + Number(length[1]);
      if (this.buf.length < end) return;
      this.buf = this.buf.subarray(end);
      const now = performance.now();
      const status = Number(head.slice(9, 12));
      if (status < 200 || status > 299) non2xx++;
      if (this.inflight) {
        fromIntended[completed] = now - this.inflight.intended;
        intendedAt[completed] = this.inflight.intended;
        completed++;
        this.inflight = null;
      }
      // As any HTTP client: a connection the server closes (maxRequestsPerSocket) takes no further
      // request; the 'close' handler puts a new one in its place.
      if (/\r\nconnection:\s*close/i.test(head)) return void this.socket.end();
      this.release();
    }
  }
}

// Free connections are taken oldest first (FIFO), so all of them stay in use, as with wrk.
const connections = Array.from({ length: o.connections ?? 64 }, () => new Connection());
await Promise.all(connections.map((c) => c.ready));
free.push(...connections);

const t0 = performance.now();
let next = 0;
await new Promise((resolve) => {
  const tick = () => {
    const now = performance.now();
    for (; next < total && t0 + next * interval <= now; next++) {
      const intended = t0 + next * interval;
      late[next] = now - intended;
      const c = free.shift();
      if (c) c.send(intended);
      else backlog.push(intended);
    }
    if (next >= total) return resolve(undefined);
    const wait = t0 + next * interval - performance.now();
    // Timers are only ms-precise: sleep when the next send is far, otherwise yield to I/O and
    // come straight back (this spins the load core, which is what it is for).
    if (wait > 2) setTimeout(tick, wait - 1);
    else setImmediate(tick);
  };
  tick();
});
const sendEnd = performance.now();
while (performance.now() - sendEnd < 5000 && (backlog.length > 0 || free.length < connections.length)) {
  await new Promise((r) => setTimeout(r, 5));
}
stopping = true;
for (const c of connections) c.socket.destroy();

const pct = (arr, p, n = completed) => {
  const v = arr.slice(0, n).sort();
  return v.length ? v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)] : NaN;
};
process.stdout.write(
  'OPENLOOP_JSON ' +
    JSON.stringify({
      requests: completed,
      intended: total,
      duration_s: (sendEnd - t0) / 1000,
      rps: completed / ((sendEnd - t0) / 1000),
      non2xx,
      // Requests never answered (lost with a closed connection, or still open 5 s after the end).
      errors: total - completed,
      socket_errors: socketErrors,
      lost_on_close: lost,
      late_ms: { p99: pct(late, 99, total), max: pct(late, 100, total) },
      // The five slowest requests: when they were due (ms since the epoch) and how long they took.
      slowest: [...fromIntended.subarray(0, completed).keys()]
        .sort((a, b) => fromIntended[b] - fromIntended[a])
        .slice(0, 5)
        .map((i) => ({ atEpochMs: Math.round(performance.timeOrigin + intendedAt[i]), ms: Number(fromIntended[i].toFixed(1)) })),
      latency_ms: {
        p50: pct(fromIntended, 50),
        p90: pct(fromIntended, 90),
        p99: pct(fromIntended, 99),
        p999: pct(fromIntended, 99.9),
        max: pct(fromIntended, 100),
      },
    }) +
    '\n',
);
