import type { IncomingMessage, ServerResponse } from 'node:http';
import { canAnswerOn, ConnectionClosed, sendContinue } from './connections';
import { HttpProblem } from './problem';

/**
 * Reads the body to its end and throws it away: 413 past `limit` (before 100 Continue when it is
 * announced), ConnectionClosed when the answer cannot be given. The usual readers (raw-body,
 * co-body) keep the body in memory, the cost this service must not pay for a body it does not read.
 */
export function drainRequestBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<void> {
  const announced = req.headers['content-length'];
  if (announced !== undefined && Number(announced) > limit) {
    return Promise.reject(tooLarge(limit));
  }
  if (req.readableEnded) return canAnswerOn(req.socket) ? Promise.resolve() : Promise.reject(new ConnectionClosed());
  sendContinue(res);

  return new Promise((resolve, reject) => {
    let received = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onClosed);
      req.off('close', onClosed);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) {
        cleanup();
        reject(tooLarge(limit));
      }
    };
    const onEnd = (): void => {
      cleanup();
      if (canAnswerOn(req.socket)) resolve();
      else reject(new ConnectionClosed());
    };
    // A request errors ('aborted') or closes before its end only when its connection is gone.
    const onClosed = (): void => {
      cleanup();
      reject(new ConnectionClosed());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onClosed);
    req.on('close', onClosed);
  });
}

function tooLarge(limit: number): HttpProblem {
  // The rest of the body is never read, so the connection cannot carry another request.
  return new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes.`, {
    Connection: 'close',
  });
}
