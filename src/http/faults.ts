/**
 * Game-day faults: POST /product made slow (FAULT_DELAY) or failing (FAULT_ERROR_RATIO) on purpose,
 * so that an incident can be rehearsed (docs/runbook.md, "Game day"). An injected failure is thrown
 * like any unexpected error, so it takes the real paths: the 500 problem answer and its error log
 * line (answerProblems), the request histogram with its exemplar and the request log line
 * (recordRequests), and the server span's error status (instrumentation-http, from the 500).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Faults } from '../config';
import { canAnswerOn } from './connections';
import { ConnectionClosed } from './request-body';

/** The failure FAULT_ERROR_RATIO throws; its message, in the error log line, says it was injected. */
class InjectedFault extends Error {
  constructor(errorRatio: number) {
    super(`fault injected on purpose (FAULT_ERROR_RATIO=${errorRatio})`);
    this.name = 'InjectedFault';
  }
}

/** Runs after the request body was read and before an id is issued. */
type FaultInjector = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Whether any fault is set. */
export const faultsSet = (faults: Faults): boolean => faults.faultErrorRatio > 0 || faults.faultDelayMs > 0;

/** The faults to inject, or undefined when none is set: POST /product then runs exactly as without this module. */
export function faultInjector(faults: Faults): FaultInjector | undefined {
  if (!faultsSet(faults)) return undefined;
  const { faultErrorRatio: errorRatio, faultDelayMs: delayMs } = faults;
  return async (req, res) => {
    if (delayMs > 0) {
      await delayUnlessClosed(delayMs, res);
      // A caller that gave up during the delay is recorded as such (499), and gets no id.
      if (!canAnswerOn(req.socket)) throw new ConnectionClosed();
    }
    if (Math.random() < errorRatio) throw new InjectedFault(errorRatio);
  };
}

/**
 * Waits `ms`, or less if the connection closes first: a delayed request whose caller left holds
 * nothing until the delay would have ended, so callers that time out and retry cannot pile up.
 */
function delayUnlessClosed(ms: number, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    // Before the answer is written, a response closes only when its connection does.
    res.once('close', done);
  });
}
