'use strict';
// How waiting calls share libuv's pool: each may last long while it leaves
// one of the pool's threads free, and the handles with one in progress are
// interrupted when Node exits; a pull lined up for its Queue's waiting
// call (WaitRequest), and the time for deadlines.

const { lib } = require('./native');

/** The longest one waiting C call lasts, in milliseconds: a pull without a
 * bound (`wait: Infinity`) waits in calls of an hour, each of which starts
 * with a claim. */
const LONGEST_WAIT_MS = 3_600_000;

/** The longest a waiting call lasts, in milliseconds, while waiting calls
 * fill all of libuv's threads but one (see startWaiting). */
const CROWDED_WAIT_MS = 100;

/** The threads of libuv's pool, which libuv sizes from UV_THREADPOOL_SIZE
 * (4 by default, at most 1024) when it first uses the pool. */
const POOL_THREADS = Math.min(Math.max(Number.parseInt(process.env.UV_THREADPOOL_SIZE, 10) || 4, 1), 1024);

/** The handles with a waiting call in progress. Before Node exits it joins
 * libuv's worker threads, so on exit (process.exit(), an uncaught
 * exception) their waits are interrupted: the process would otherwise stay
 * until the waits ran out. */
const waitingHandles = new Map();
process.on('exit', () => {
  for (const ptr of waitingHandles.keys()) lib.tq_interrupt(ptr);
});

/** The waiting calls in progress in this process that may last up to
 * LONGEST_WAIT_MS. */
let longWaits = 0;
let warnedOfCrowding = false;

/**
 * Counts one more waiting call on the handle `ptr`, and returns how long
 * it may last, in ms. Waiting calls may last long while they leave one of
 * libuv's threads free; the others last CROWDED_WAIT_MS at most, so that
 * the short calls of every Queue (and the file system, DNS) lined up in
 * libuv get a thread between two of them. Warns, once, when that starts.
 */
function startWaiting(ptr) {
  waitingHandles.set(ptr, (waitingHandles.get(ptr) ?? 0) + 1);
  if (longWaits < POOL_THREADS - 1) {
    longWaits++;
    return LONGEST_WAIT_MS;
  }
  if (!warnedOfCrowding) {
    warnedOfCrowding = true;
    process.emitWarning(
      `tq's waiting calls fill ${POOL_THREADS - 1} of the ${POOL_THREADS} threads of libuv's pool, ` +
        `so further ones wait ${CROWDED_WAIT_MS} ms at a time, letting other calls through in between: ` +
        'set UV_THREADPOOL_SIZE to 2 per Queue that waits, plus 4, before Node starts',
      { type: 'TqWarning', code: 'TQ_POOL_CROWDED' },
    );
  }
  return CROWDED_WAIT_MS;
}

/** Counts one waiting call on `ptr` less; `lastsMs` is what startWaiting
 * returned for it. */
function stopWaiting(ptr, lastsMs) {
  if (lastsMs === LONGEST_WAIT_MS) longWaits--;
  const calls = waitingHandles.get(ptr) - 1;
  if (calls) waitingHandles.set(ptr, calls);
  else waitingHandles.delete(ptr);
}

/** The time now, in milliseconds, for deadlines. */
function now() {
  return performance.now();
}

/** A pull waiting for its turn to make the Queue's waiting call. */
class WaitRequest {
  constructor(run, signal, resolve, reject) {
    this.run = run;
    this.signal = signal;
    this.resolve = resolve;
    this.reject = reject;
    /** True once resolved or rejected. */
    this.settled = false;
    /** True once its waiting call started: its signal then ends the wait
     * through a tq_cancel rather than in line. */
    this.active = false;
    /** Removes the listener on its signal while in line, if any. */
    this.stopListening = null;
  }
}

/** Runs `action` unless the request was settled already. */
function settle(request, action) {
  if (!request.settled) {
    request.settled = true;
    request.stopListening?.();
    action();
  }
}

module.exports = { WaitRequest, now, settle, startWaiting, stopWaiting };
