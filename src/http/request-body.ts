import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectionClosed, sendContinue } from './connections';
import { HttpProblem } from './problem';

/**
 * Reads the body to its end and throws it away: 413 past `limit` (before 100 Continue when it is
 * announced), ConnectionClosed when the answer cannot be given. The usual readers (raw-body,
 * co-body) keep the body in memory, the cost this service must not pay for a body it does not read.
 */
export function drainRequestBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<void> {
  // Number(undefined) is NaN, above no limit.
  if (Number(req.headers['content-length']) > limit) return Promise.reject(tooLarge(res, limit));
  sendContinue(res);

  // Listeners stay until the request is collected: a settled promise ignores what they do after.
  return new Promise((resolve, reject) => {
    let received = 0;
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received <= limit) return;
      // Stryker disable next-line CallExpression,StringLiteral: the rest of a refused body would build a 413 per chunk, which the settled promise drops
      req.off('data', onData);
      reject(tooLarge(res, limit));
    };
    req.on('data', onData);
    req.on('end', resolve);
    // Before the body's end, a request errors ('aborted') when its connection is gone, and its response
    // closes then too, or once the server has answered it (a 408 mid-body): its body's end comes too late.
    const onClosed = (): void => reject(new ConnectionClosed());
    req.on('error', onClosed);
    res.on('close', onClosed);
  });
}

/**
 * The rest of the body is never read, so the connection cannot carry another request: Node closes
 * it once the answer is written. A client still sending may lose the answer to the reset that
 * follows (node:http has no lingering close; docs/reliability.md).
 */
function tooLarge(res: ServerResponse, limit: number): HttpProblem {
  res.shouldKeepAlive = false;
  return new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes.`);
}
