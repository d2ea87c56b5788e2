'use strict';
// runWorker: N concurrent handlers on one Queue, each task's lease renewed
// while its handler's promise is pending, and a graceful stop on SIGINT and
// SIGTERM (or an AbortSignal): no new task is taken, the handlers running
// finish, and then the promise resolves.
//
// One loop commits for every handler: whenever tasks' handlers have
// resolved or handlers are free, one call (finishAndPullMany) finishes the
// first and claims for the others, in one transaction; the handlers that
// end while it runs are finished by the next. When no task is ready, the
// loop waits in a pull, which a handler ending cuts short. So a busy worker
// pays one commit for several tasks, and never holds more tasks than
// handlers.

const { setTimeout: sleep } = require('node:timers/promises');
const errors = require('./errors');

// A call refused for a while is tried again after these waits, doubling.
const FIRST_RETRY_WAIT_MS = 50;
const MAX_RETRY_WAIT_MS = 2000;

/**
 * Runs `handler(task, { signal })` on the tasks of `queue`, up to
 * `concurrency` at a time. A handler that resolves finishes its task; one
 * that throws or rejects fails it with the error as the reason; `signal`
 * aborts when the delivery is lost or the task cancelled. See index.d.ts.
 */
async function runWorker(queue, handler, options = {}) {
  const {
    concurrency = 4,
    lease = 30_000,
    heartbeat = lease / 3,
    signal,
    stopOnSignals = true,
    onError = (error) => console.error(`tq worker: ${error.message}`),
  } = options;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new errors.InvalidArgumentError(`concurrency must be a positive integer, not ${concurrency}`);
  }
  if (typeof handler !== 'function') {
    throw new TypeError('handler must be a function');
  }
  const stop = new AbortController();
  const onStopSignal = () => stop.abort();
  const stopSignals = stopOnSignals ? ['SIGINT', 'SIGTERM'] : [];
  for (const name of stopSignals) process.on(name, onStopSignal);
  signal?.addEventListener('abort', onStopSignal, { once: true });
  if (signal?.aborted) stop.abort();

  const report = (error, task) => reportError(onError, error, task);
  const stats = { finished: 0, failed: 0, lost: 0 };
  // The tasks whose handlers run, each with its handler's abort controller
  // and its next renewal; those whose handlers resolved, to finish; the
  // fails in progress.
  const running = new Map();
  let toFinish = [];
  const failing = new Set();
  // Wakes the loop: a handler ended, or the worker stops.
  let wake = () => {};
  let idle = null;
  const nudge = () => {
    wake();
    idle?.abort();
  };
  stop.signal.addEventListener('abort', nudge, { once: true });

  const renewals = new Renewals(heartbeat, (task, entry) => renew(task, entry));
  const renew = async (task, entry) => {
    try {
      await task.extend(lease);
    } catch (error) {
      if (task.closed) {
        renewals.remove(task);
        entry.ended.abort(error);
      }
      report(error, task);
    }
  };

  // Never rejects: the handler's failure fails the task, and the failure
  // to fail it goes to onError.
  const start = (task) => {
    const entry = { ended: new AbortController() };
    running.set(task, entry);
    renewals.add(task, entry);
    Promise.resolve()
      .then(() => handler(task, { signal: entry.ended.signal }))
      .then(
        () => {
          toFinish.push(task);
          return null;
        },
        // A task handed back to wait is neither finished nor failed.
        (failure) => (failure instanceof errors.SuspendedError ? null : (failure ?? new Error(String(failure)))),
      )
      .then((failure) => {
        renewals.remove(task);
        running.delete(task);
        if (failure !== null) {
          const fail = failTask(task, failure).finally(() => {
            failing.delete(fail);
            nudge();
          });
          failing.add(fail);
        }
        nudge();
      });
  };
  const failTask = async (task, failure) => {
    try {
      await retryFor(lease, () => task.fail(failure instanceof Error ? failure : String(failure)), report, task);
      stats.failed++;
    } catch (error) {
      stats.lost++;
      report(error, task);
    }
  };
  const countFinished = (batch, outcomes) => {
    batch.forEach((task, i) => {
      if (outcomes[i] === null) {
        stats.finished++;
      } else {
        stats.lost++;
        report(outcomes[i], task);
      }
    });
  };
  // Finishes `batch` alone, trying again while refused for a while, for
  // up to one lease.
  const finishAlone = async (batch) => {
    if (!batch.length) return;
    try {
      countFinished(batch, (await retryFor(lease, () => queue._finishAndClaim(batch, 0), report, null))[0]);
    } catch (error) {
      stats.lost += batch.length;
      for (const task of batch) report(error, task);
    }
  };

  let retryWait = FIRST_RETRY_WAIT_MS;
  try {
    while (!stop.signal.aborted) {
      const free = concurrency - running.size - failing.size;
      if (!toFinish.length && free <= 0) {
        await new Promise((resolve) => {
          wake = resolve;
        });
        continue;
      }
      const batch = toFinish;
      toFinish = [];
      let claimed;
      try {
        let outcomes;
        [outcomes, claimed] = await queue._finishAndClaim(batch, Math.max(free, 0), lease);
        countFinished(batch, outcomes);
        retryWait = FIRST_RETRY_WAIT_MS;
      } catch (error) {
        // Nothing done, or not known: the finishes are tried alone.
        await finishAlone(batch);
        if (stop.signal.aborted || error instanceof errors.ClosedError) break;
        if (!isTransient(error) && !(error instanceof errors.UnknownOutcomeError)) throw error;
        report(error, null);
        await sleep(retryWait, undefined, { signal: stop.signal }).catch(() => {});
        retryWait = Math.min(2 * retryWait, MAX_RETRY_WAIT_MS);
        continue;
      }
      for (const task of claimed) start(task);
      if (claimed.length || free <= 0 || toFinish.length || stop.signal.aborted) continue;
      // Nothing ready: wait in a pull, which a handler ending cuts short
      // (its task is then finished at once).
      idle = new AbortController();
      try {
        const waited = await queue.pullMany(free, { wait: Infinity, lease, signal: idle.signal });
        for (const task of waited) start(task);
        retryWait = FIRST_RETRY_WAIT_MS;
      } catch (error) {
        if (idle.signal.aborted) continue;
        if (error instanceof errors.ClosedError) break;
        if (!isTransient(error)) throw error;
        report(error, null);
        await sleep(retryWait, undefined, { signal: stop.signal }).catch(() => {});
        retryWait = Math.min(2 * retryWait, MAX_RETRY_WAIT_MS);
      } finally {
        idle = null;
      }
    }
  } finally {
    // No task is claimed any more: the handlers running end, and their
    // tasks are finished.
    while (running.size || failing.size || toFinish.length) {
      if (toFinish.length) {
        const batch = toFinish;
        toFinish = [];
        await finishAlone(batch);
        continue;
      }
      await new Promise((resolve) => {
        wake = resolve;
      });
    }
    renewals.close();
    for (const name of stopSignals) process.off(name, onStopSignal);
    signal?.removeEventListener('abort', onStopSignal);
    stop.signal.removeEventListener('abort', nudge);
  }
  return stats;
}

/**
 * The lease renewals of the tasks whose handlers run: each renewed every
 * `heartbeat` ms, on one timer armed for the next one due. A renewal still
 * in progress is not started again (one waiting for the file's lock
 * delays no other task's).
 */
class Renewals {
  #heartbeat;
  #renew;
  #due = new Map();
  #timer = null;
  #timerAt = Infinity;

  constructor(heartbeat, renew) {
    this.#heartbeat = heartbeat;
    this.#renew = renew;
  }

  add(task, entry) {
    const at = performance.now() + this.#heartbeat;
    this.#due.set(task, { entry, at, renewing: false });
    if (at < this.#timerAt) this.#arm(at);
  }

  remove(task) {
    this.#due.delete(task);
  }

  close() {
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#due.clear();
  }

  #arm(at) {
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, at - performance.now()));
  }

  #tick() {
    this.#timer = null;
    this.#timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const [task, due] of this.#due) {
      if (due.at <= now && !due.renewing) {
        due.renewing = true;
        due.at = now + this.#heartbeat;
        this.#renew(task, due.entry).finally(() => {
          due.renewing = false;
        });
      }
      next = Math.min(next, due.at);
    }
    if (next !== Infinity) this.#arm(next);
  }
}

/** Whether a call refused with `error` is worth trying again: refused for
 * a while (a busy file, a PostgreSQL server restarting). */
function isTransient(error) {
  return error instanceof errors.BusyError || error instanceof errors.IoError;
}

/** Resolves to `call()`, calling it again while it is refused for a while
 * or its outcome is not known, for up to `leaseMs`: past it, the tasks
 * concerned are delivered again anyway. Each refusal goes to `report`
 * first. */
async function retryFor(leaseMs, call, report, task) {
  let wait = FIRST_RETRY_WAIT_MS;
  const giveUp = performance.now() + leaseMs;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      const retryable = isTransient(error) || error instanceof errors.UnknownOutcomeError;
      if (!retryable || performance.now() >= giveUp) throw error;
      report(error, task);
      await sleep(wait);
      wait = Math.min(2 * wait, MAX_RETRY_WAIT_MS);
    }
  }
}

/**
 * Tells `onError` of `error`. An onError that throws is reported as a
 * process warning (process.emitWarning, with the thrown error as its
 * cause) rather than thrown: a worker holds leased tasks, and a logging
 * hook that fails must not end it with an uncaught exception. A warning is
 * Node's report of a fault that the process survives: printed to stderr
 * once per warning and given to `process.on('warning')` listeners.
 */
function reportError(onError, error, task) {
  try {
    onError(error, task);
  } catch (thrown) {
    const warning = new Error(`runWorker's onError threw while told of "${error?.message ?? error}": ${thrown?.message ?? thrown}`, {
      cause: thrown,
    });
    warning.name = 'TqWarning';
    process.emitWarning(warning);
  }
}

module.exports = { runWorker };
