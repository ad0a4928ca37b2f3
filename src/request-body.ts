import type { IncomingMessage } from 'node:http';
import { HttpProblem } from './problem';

/**
 * Reads the request body to its end and throws it away, counting bytes as they stream, so that
 * any body is accepted (the spec never interprets it) while nothing is buffered or parsed.
 * Rejects with 413 as soon as the body (or its announced Content-Length) is larger than `limit`.
 *
 * Hand-written because the usual readers (raw-body, co-body) collect the body in memory, which
 * is exactly the cost this service must not pay for a body it does not read.
 */
export function drainRequestBody(req: IncomingMessage, limit: number): Promise<void> {
  const announced = req.headers['content-length'];
  if (announced !== undefined && Number(announced) > limit) {
    return Promise.reject(tooLarge(limit));
  }
  if (req.readableEnded) return Promise.resolve();

  return new Promise((resolve, reject) => {
    let received = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
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
      resolve();
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    // The client went away before sending the whole body: nobody is left to answer.
    const onClose = (): void => {
      cleanup();
      reject(new HttpProblem(400, 'The request body ended before its announced length.'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function tooLarge(limit: number): HttpProblem {
  // The rest of the body is never read, so the connection cannot carry another request.
  return new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes.`, {
    Connection: 'close',
  });
}
