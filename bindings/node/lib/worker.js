'use strict';
// runWorker: N concurrent handlers on one Queue, each task's lease renewed
// while its handler's promise is pending, and a graceful stop on SIGINT and
// SIGTERM (or an AbortSignal): no new task is taken, the handlers running
// finish, and then the promise resolves.

const { setTimeout: sleep } = require('node:timers/promises');
const errors = require('./errors');

// A pull refused for a while is tried again after these waits, doubling.
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
  const running = new Set();
  // Resolved whenever a handler ends, so the loop below can take a task.
  let slotFreed = () => {};

  // Never rejects: the handler's failure fails the task, and the failure
  // to finish or fail it goes to onError.
  const work = async (task) => {
    // Renews the lease while the handler works, each task on its own timer
    // (one extend waiting for the file's lock delays no other task's); a
    // beat is skipped while the previous extend is still in progress. A
    // lost lease or a cancelled task stops the heartbeats and aborts the
    // handler's signal.
    const ended = new AbortController();
    let extending = false;
    const beat = setInterval(async () => {
      if (extending) return;
      extending = true;
      try {
        await task.extend(lease);
      } catch (error) {
        if (task.closed) {
          clearInterval(beat);
          ended.abort(error);
        }
        report(error, task);
      } finally {
        extending = false;
      }
    }, heartbeat);
    let failure = null;
    try {
      await handler(task, { signal: ended.signal });
    } catch (error) {
      failure = error;
    } finally {
      clearInterval(beat);
    }
    try {
      if (failure === null) {
        await task.finish();
        stats.finished++;
      } else {
        await task.fail(failure instanceof Error ? failure : String(failure));
        stats.failed++;
      }
    } catch (error) {
      stats.lost++;
      report(error, task);
    }
  };

  let retryWait = FIRST_RETRY_WAIT_MS;
  try {
    while (!stop.signal.aborted) {
      if (running.size >= concurrency) {
        await new Promise((resolve) => {
          slotFreed = resolve;
        });
        continue;
      }
      // One claim for every free handler: a single transaction (and, on
      // PostgreSQL, a single round trip) rather than one per handler, and
      // never more tasks than handlers to run them.
      let tasks;
      try {
        tasks = await queue.pullMany(concurrency - running.size, { wait: Infinity, lease, signal: stop.signal });
        retryWait = FIRST_RETRY_WAIT_MS;
      } catch (error) {
        if (stop.signal.aborted || error instanceof errors.ClosedError) break;
        if (!(error instanceof errors.BusyError || error instanceof errors.IoError)) throw error;
        // Refused for a while (a busy file, a PostgreSQL server
        // restarting): try again rather than stop.
        report(error, null);
        await sleep(retryWait, undefined, { signal: stop.signal }).catch(() => {});
        retryWait = Math.min(2 * retryWait, MAX_RETRY_WAIT_MS);
        continue;
      }
      for (const task of tasks) {
        const job = work(task).finally(() => {
          running.delete(job);
          slotFreed();
        });
        running.add(job);
      }
    }
  } finally {
    await Promise.all(running);
    for (const name of stopSignals) process.off(name, onStopSignal);
    signal?.removeEventListener('abort', onStopSignal);
  }
  return stats;
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
