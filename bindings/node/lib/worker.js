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

  const stats = { finished: 0, failed: 0, lost: 0 };
  const running = new Set();
  // Resolved whenever a handler ends, so the loop below can take a task.
  let slotFreed = () => {};

  const work = async (task) => {
    // Renews the lease while the handler works; a lost lease or a
    // cancelled task stops the heartbeats and aborts the handler's signal.
    const ended = new AbortController();
    const beat = setInterval(() => {
      try {
        task.extend(lease);
      } catch (error) {
        clearInterval(beat);
        ended.abort(error);
        onError(error, task);
      }
    }, heartbeat);
    let outcome;
    try {
      await handler(task, { signal: ended.signal });
      outcome = () => {
        task.finish();
        stats.finished++;
      };
    } catch (error) {
      outcome = () => {
        task.fail(error instanceof Error ? error : String(error));
        stats.failed++;
      };
    } finally {
      clearInterval(beat);
    }
    try {
      outcome();
    } catch (error) {
      stats.lost++;
      onError(error, task);
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
        onError(error, null);
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

module.exports = { runWorker };
