/**
 * Game-day faults (docs/runbook.md, "Game day"): an injected failure is thrown like any unexpected
 * error, so that it takes the real paths: the 500 answer, its logs, metrics and span.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Faults } from '../config';
import type { Logger } from '../observability/logger';
import { canAnswerOn, ConnectionClosed } from './connections';

class InjectedFault extends Error {
  constructor(errorRatio: number) {
    super(`fault injected on purpose (FAULT_ERROR_RATIO=${errorRatio})`);
    this.name = 'InjectedFault';
  }
}

const faultsSet = (faults: Faults): boolean => faults.faultErrorRatio > 0 || faults.faultDelayMs > 0;

/** Undefined when none is set: POST /product then runs exactly as without this module. */
export function faultInjector(faults: Faults): ((req: IncomingMessage, res: ServerResponse) => Promise<void>) | undefined {
  // Stryker disable next-line ConditionalExpression: an injector with no fault set does nothing; undefined spares each request the call
  if (!faultsSet(faults)) return undefined;
  const { faultErrorRatio: errorRatio, faultDelayMs: delayMs } = faults;
  return async (req, res) => {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a 0 ms delay answers the same a tick later; the check spares each request a timer
    if (delayMs > 0) {
      await delayUnlessClosed(delayMs, res);
      // A caller that gave up during the delay is recorded as such (499), and gets no id.
      if (!canAnswerOn(req.socket)) throw new ConnectionClosed();
    }
    // Stryker disable next-line EqualityOperator: Math.random() equals the ratio with probability zero
    if (Math.random() < errorRatio) throw new InjectedFault(errorRatio);
  };
}

/** A rehearsal must not be mistaken for an incident: said at start, and on /metrics. */
export function warnOfFaults(logger: Logger, faults: Faults): void {
  if (!faultsSet(faults)) return;
  logger.warn(
    { fault_error_ratio: faults.faultErrorRatio, fault_delay_ms: faults.faultDelayMs },
    'faults injected into POST /product on purpose (FAULT_ERROR_RATIO, FAULT_DELAY): unset them to end the rehearsal',
  );
}

/** Ends early when the caller leaves, so that callers that time out and retry cannot pile up. */
async function delayUnlessClosed(ms: number, res: ServerResponse): Promise<void> {
  const left = new AbortController();
  const onClose = (): void => left.abort();
  // Before the answer is written, a response closes only when its connection does; aborting after the delay ends does nothing.
  res.once('close', onClose);
  await sleep(ms, undefined, { signal: left.signal }).catch(() => undefined);
}
