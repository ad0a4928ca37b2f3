import type { IncomingMessage, ServerResponse } from 'node:http';
import { canAnswerOn, sendContinue } from './connections';
import { HttpProblem } from './problem';

/**
 * The request's connection closed before its answer could be given: the client went away, or the
 * server already answered the connection (408) and closed it. Nothing is answered, and nothing is
 * wrong with the server.
 */
export class ConnectionClosed extends Error {
  constructor() {
    super('The connection closed before the request could be answered.');
    this.name = 'ConnectionClosed';
  }
}

/**
 * Reads the request body to its end and throws it away, counting bytes as they stream, so that
 * any body is accepted (the API never interprets it) while nothing is buffered or parsed.
 * Rejects with 413 as soon as the body (or its announced Content-Length) is larger than `limit`,
 * before 100 Continue is sent to a client that waits for it; rejects with ConnectionClosed when
 * the connection closes first, or cannot carry an answer any more once the body has arrived.
 *
 * Hand-written because the usual readers (raw-body, co-body) collect the body in memory, which
 * is exactly the cost this service must not pay for a body it does not read.
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
