'use strict';
// Queue: a handle on one queue, the first of libtq's objects in JavaScript
// (Task and TaskSnapshot are in task.js, the shared waiting in waiting.js).
//
// Ownership. A Queue owns one tq_queue handle and a Task one tq_task. Each
// is freed exactly once: by close(), or, as a safety net, when the object
// is garbage collected (a FinalizationRegistry). A task's fields are all
// copied into JavaScript when it is pulled, so they stay readable after its
// delivery ends; the library's task is freed as soon as the delivery ends
// (finished, failed, found not held) or the task is closed.
//
// Blocking. Every call that may wait (for the file's write lock, a flush
// of the disk, the network of a PostgreSQL server) is an asynchronous koffi
// call on one of libuv's worker threads and returns a Promise, so the event
// loop never waits for the library; only reading a task's fields, which
// were copied into JavaScript, is synchronous. The few `...Sync` forms
// (openSync, pushSync, pullSync, finishSync) are for scripts.
//
// Worker threads. libuv's pool is small (4 threads by default) and shared
// with the file system, DNS and zlib, so each Queue bounds what it holds
// there: at most CALLS_AT_ONCE short calls (a push, a finish, a count...)
// at a time, the others lining up in JavaScript; one waiting pull, the
// other waiting pulls lining up behind it, each first claiming a ready task
// with a short call; and one wait for a change (tq_wait_change) on behalf
// of every wait() and watchCancellation(), which read their tasks again with
// short calls whenever it returns. So a Queue holds at most
// CALLS_AT_ONCE + 2 of the pool's threads, however many calls are made.
// Pushes without options made in the same turn of the event loop, or
// lined up for a place meanwhile, run together, in one tq_push_batch; so do
// finishes without a result and pulls with the default lease, in one
// tq_finish_and_pull_batch (or tq_pull_batch when only pulls came): the
// handlers a C call's return resumes share the next trip to the pool.
//
// Threads. JavaScript calls on one Queue never overlap. worker_threads each
// load the package and open their own Queue; libtq's handle is thread-safe,
// so they may share a file as processes do.

const { lib, koffi } = require('./native');
const errors = require('./errors');
const {
  BUSY,
  MERGED,
  EMPTY,
  FIRST_RETRY_MS,
  INTERRUPTED,
  IO,
  MAX_RETRY_MS,
  OK,
  asyncError,
  callAsync,
  check,
  checkAsync,
} = require('./limits');
const {
  buildOptions,
  callOptions,
  checkSignal,
  describe,
  encode,
  integer,
  lengths,
  milliseconds,
  openSettings,
  payloadPointer,
  pullOptions,
  pushOptions,
  pushSettings,
  redacted,
  withIndex,
} = require('./options');
const { QueueAdmin } = require('./admin');
const { QueueSchedules } = require('./schedule');
const { NO_IDS, State, Task, TaskSnapshot, adoptAll, adoptSnapshot, noTaskToWaitFor, readFields, readSteps } = require('./task');
const { WaitRequest, now, settle, startWaiting, stopWaiting } = require('./waiting');

/** How many short C calls (everything but the waiting ones) one Queue runs
 * at once on libuv's worker threads; more line up in JavaScript. Two keep
 * a commit going while the next call enters the library, where concurrent
 * writes of one handle share a transaction (group commit), yet leave
 * threads of the pool to the file system and other Queues. */
const CALLS_AT_ONCE = 2;

/** Frees a handle that its Queue object never closed. */
const unclosedQueues = new FinalizationRegistry((ptr) => lib.tq_close(ptr));

/** Passed to the constructor by open and openSync, so that a Queue is
 * only made from a handle they opened. */
const OPENED = Symbol('opened by tq.open');

/** The settings of an open: the options object built, or null. */
function openArguments(location, options) {
  if (typeof location !== 'string') {
    throw new TypeError(`the location must be a string (a path or a URL), not ${describe(location)}`);
  }
  if (location.includes('\0')) {
    // Not shown: the location may be a URL with a password.
    throw new errors.InvalidArgumentError(`the location contains a NUL character (at ${location.indexOf('\0')})`);
  }
  const settings = openSettings(options);
  return settings.length ? buildOptions(lib.tq_options_new, lib.tq_options_free, settings) : null;
}

/**
 * Opens (and creates if needed) the queue `options.queue` in the SQLite
 * file at `location`, or in the PostgreSQL database of a `postgres://` URL,
 * on one of libuv's worker threads (an open may wait for the file's lock,
 * run a migration or connect to a server); resolves to the Queue. See
 * index.d.ts for the options.
 */
async function open(location, options = {}) {
  const built = openArguments(location, options);
  const out = [null];
  let status;
  try {
    status = await callAsync(lib.tq_open, location, built, out);
  } finally {
    if (built) lib.tq_options_free(built);
  }
  if (status < 0) {
    throw errors.fromStatus(status, `tq_open of ${JSON.stringify(redacted(location))}: ${lib.tq_status_str(status)}`);
  }
  return new Queue(OPENED, out[0], location, options);
}

/** open() on the calling thread, for scripts: the event loop waits meanwhile. */
function openSync(location, options = {}) {
  const built = openArguments(location, options);
  const out = [null];
  try {
    check(lib.tq_open(location, built, out));
  } finally {
    if (built) lib.tq_options_free(built);
  }
  return new Queue(OPENED, out[0], location, options);
}

class Queue {
  #ptr;
  #name;
  #shownPath;
  #closing = false;
  /** The waiting pull in progress (a Promise) or null. */
  #waiting = null;
  /** The WaitRequests lined up behind it. */
  #line = [];
  /** The short C calls in progress on libuv's worker threads. */
  #callsInFlight = 0;
  /** Functions that start a short call, lined up for a place. */
  #callLine = [];
  /** Calls lined up for the end of the turn or for a place, by kind
   * ('push', 'delivery': finishes and pulls), that one batch call will run
   * together: arrays of { value, resolve, reject }. */
  #batches = new Map();
  /** The batches waiting for the end of the turn to ask for a place: the
   * functions that ask. */
  #batchesToStart = new Set();
  /** Every asynchronous C call using the handle (Promises that never
   * reject), waited for before the handle is freed. */
  #calls = new Set();
  /** The waits of wait() and watchCancellation() (Watchers). */
  #watchers = new Set();
  /** The tq_cancel that ends the wait for changes once no one waits, while
   * that wait runs. */
  #changeWait = null;
  /** Resolved once the handle is freed. */
  #closed = null;

  /** Not for direct use: `await tq.open(location, options)` (or
   * tq.openSync) opens a queue. */
  constructor(opened, ptr, location, options) {
    if (opened !== OPENED) {
      throw new TypeError('open a queue with `await tq.open(location, options)` (or tq.openSync in a script)');
    }
    this.#ptr = ptr;
    this.#name = options.queue ?? 'default';
    this.#shownPath = redacted(location);
    unclosedQueues.register(this, this.#ptr, this);
  }

  /** The name of the queue in its file. */
  get name() {
    return this.#name;
  }

  /** The location as messages show it (a URL without its password). */
  get location() {
    return this.#shownPath;
  }

  /** True once close() was called. */
  get closed() {
    return this.#closing;
  }

  /** The handle for a call, or a ClosedError. */
  _handle() {
    if (this.#closing) {
      throw this.#closedError();
    }
    return this.#ptr;
  }

  #closedError() {
    return new errors.ClosedError(`the queue ${JSON.stringify(this.#name)} in ${JSON.stringify(this.#shownPath)} is closed`);
  }

  /**
   * Closes the queue: pulls and waits on it reject with ClosedError, calls
   * not yet started too, and the handle is freed once the calls in
   * progress have returned. Resolves then. Idempotent; later calls reject
   * with ClosedError. Tasks already pulled stay readable and can be
   * closed, but no longer finished.
   */
  close() {
    if (this.#closed) {
      return this.#closed;
    }
    // Calls made before close() ask for a place now, as they would have
    // at the end of the turn: those that get one run.
    for (const start of this.#batchesToStart) start();
    this.#closing = true;
    for (const request of this.#line.splice(0)) {
      settle(request, () => request.reject(this.#closedError()));
    }
    for (const start of this.#callLine.splice(0)) start();
    const ptr = this.#ptr;
    unclosedQueues.unregister(this);
    if (this.#waiting || this.#changeWait) lib.tq_interrupt(ptr);
    // The calls in progress keep the handle alive until they return.
    // The waits of wait() and watches reject as close() resolves, so that a
    // caller awaiting close() first has not left their rejection unhandled.
    this.#closed = Promise.all([this.#waiting, ...this.#calls])
      .then(() => callAsync(lib.tq_close, ptr))
      .then(() => {
        for (const watcher of this.#watchers) watcher.settle(undefined, this.#closedError());
      });
    return this.#closed;
  }

  [Symbol.asyncDispose]() {
    return this.close();
  }

  /**
   * Runs the C function `fn` with the handle and `args` on one of libuv's
   * worker threads, at most CALLS_AT_ONCE of this Queue's at a time, and
   * resolves to its status. Rejects with ClosedError once close() began; a
   * call started before finishes first.
   */
  _call(fn, ...args) {
    return this.#inPlace(() => callAsync(fn, this.#ptr, ...args));
  }

  /** Runs `work()`, C calls on the handle that resolve once they all
   * returned, in one of the Queue's CALLS_AT_ONCE places for short calls,
   * now or once one frees; resolves as it does. */
  #inPlace(work) {
    return new Promise((resolve, reject) => {
      const start = () => {
        if (this.#closing) {
          reject(this.#closedError());
          return;
        }
        this.#callsInFlight++;
        const running = work();
        this._track(running).then(() => {
          this.#callsInFlight--;
          this.#callLine.shift()?.();
        });
        running.then(resolve, reject);
      };
      if (this.#closing) reject(this.#closedError());
      else if (this.#callsInFlight < CALLS_AT_ONCE) start();
      else this.#callLine.push(start);
    });
  }

  /**
   * Resolves to what `runTogether` gives `value`: calls of one `kind` made
   * in the same turn of the event loop, or while they wait for a place,
   * are run together, by one call of `runTogether(entries)` in one place,
   * which settles each entry. The first asks for a place at the end of the
   * turn (setImmediate, right after the poll phase that delivers a C
   * call's return): handlers resumed by one call's return make their next
   * calls in that turn, and those then share one trip to the pool. close()
   * asks at once for the batches still waiting for the end of the turn.
   */
  #together(kind, value, runTogether) {
    return new Promise((resolve, reject) => {
      let lined = this.#batches.get(kind);
      const first = lined === undefined;
      if (first) {
        lined = [];
        this.#batches.set(kind, lined);
      }
      lined.push({ value, resolve, reject });
      if (first) {
        const start = () => {
          this.#batchesToStart.delete(start);
          this.#inPlace(() => {
            // Calls from now on line up for the next batch.
            this.#batches.delete(kind);
            return runTogether(lined);
          }).catch((error) => {
            // Refused a place (the queue closed) before it ran: calls from
            // now on line up anew, and are refused in turn.
            if (this.#batches.get(kind) === lined) this.#batches.delete(kind);
            for (const entry of lined) entry.reject(error);
          });
        };
        this.#batchesToStart.add(start);
        setImmediate(() => {
          if (this.#batchesToStart.has(start)) start();
        });
      }
    });
  }

  /** _call, then the status checked: resolves to a non-negative status,
   * rejects with the error of a negative one. */
  async _checkedCall(fn, ...args) {
    return checkAsync(await this._call(fn, ...args), fn.info.name);
  }

  /** The value a call writes to `out`, a one-element array, once it
   * succeeded. */
  async _read(fn, ...args) {
    const out = [0];
    await this._checkedCall(fn, ...args, out);
    return out[0];
  }

  // --- Pushing ---------------------------------------------------------------

  /** Stores a task and resolves to its id, once stored at the queue's
   * durability. */
  async push(payload, options) {
    const data = encode(payload);
    if (options === undefined) {
      return this.#together('push', data, (entries) => this.#pushTogether(entries));
    }
    const built = pushOptions('push', options);
    const out = [0];
    try {
      await this._checkedCall(lib.tq_push, payloadPointer(data), data.length, built, out);
    } finally {
      if (built) lib.tq_push_options_free(built);
    }
    return out[0];
  }

  /** Pushes the payloads of `entries`, pushes without options lined up
   * together: in one transaction (tq_push_batch), or, when that is refused
   * for a payload or for the queue's cap (all or none), each alone, so that
   * only the pushes that fail fail. */
  async #pushTogether(entries) {
    const push = async (data) => {
      const out = [0];
      const status = await callAsync(lib.tq_push, this.#ptr, payloadPointer(data), data.length, null, out);
      if (status < 0) throw asyncError(status, 'tq_push');
      return out[0];
    };
    if (entries.length > 1) {
      const datas = entries.map((entry) => entry.value);
      const ids = new BigInt64Array(datas.length);
      const status = await callAsync(lib.tq_push_batch, this.#ptr, datas.map(payloadPointer), lengths(datas), datas.length, null, ids);
      if (status >= 0) {
        entries.forEach((entry, i) => entry.resolve(Number(ids[i])));
        return;
      }
      // A queue at its cap may have room for some of them alone.
      const eachAlone = [errors.InvalidJsonError.status, errors.InvalidArgumentError.status, errors.FullError.status];
      if (!eachAlone.includes(status)) {
        const error = asyncError(status, 'tq_push_batch');
        for (const entry of entries) entry.reject(error);
        return;
      }
    }
    for (const entry of entries) {
      await push(entry.value).then(entry.resolve, entry.reject);
    }
  }

  /** push() on the calling thread, for scripts: the event loop waits for
   * the commit (and for the file's write lock, up to the busy timeout). */
  pushSync(payload, options) {
    const data = encode(payload);
    const built = options === undefined ? null : pushOptions('push', options);
    const out = [0];
    try {
      check(lib.tq_push(this._handle(), payloadPointer(data), data.length, built, out));
    } finally {
      if (built) lib.tq_push_options_free(built);
    }
    return out[0];
  }

  /** Pushes with a unique key; resolves to { id, created, merged }: merged
   * when the pending holder of the key took the push (replacePending,
   * debounce). */
  async pushUnique(payload, uniqueKey, options = {}) {
    if (typeof uniqueKey !== 'string') {
      throw new TypeError(`uniqueKey must be a string, not ${describe(uniqueKey)}`);
    }
    const data = encode(payload);
    const built = pushOptions('pushUnique', { ...callOptions('pushUnique', options), uniqueKey });
    const out = [0];
    try {
      const status = await this._checkedCall(lib.tq_push, payloadPointer(data), data.length, built, out);
      return { id: out[0], created: status === OK, merged: status === MERGED };
    } finally {
      lib.tq_push_options_free(built);
    }
  }

  /** Stores every payload as a task in one transaction, all or none, and
   * resolves to their ids. */
  async pushMany(payloads, options = {}) {
    const datas = [];
    for (const payload of payloads) {
      try {
        datas.push(encode(payload));
      } catch (error) {
        error.message = `payload ${datas.length}: ${error.message}`;
        error.index = datas.length;
        throw error;
      }
    }
    const settings = pushSettings('pushMany', options);
    const count = datas.length;
    const ids = new BigInt64Array(Math.max(count, 1));
    const built = settings.length ? buildOptions(lib.tq_push_options_new, lib.tq_push_options_free, settings) : null;
    try {
      const status = await this._call(lib.tq_push_batch, datas.map(payloadPointer), lengths(datas), count, built, ids);
      if (status < 0) throw withIndex(asyncError(status, 'tq_push_batch'), 'payload', datas);
    } finally {
      if (built) lib.tq_push_options_free(built);
    }
    return Array.from(ids.subarray(0, count), Number);
  }

  /** Stores each item `{ payload, ...options }` as push would, in order, in
   * one transaction, all or none, and resolves to their ids (for an item
   * whose unique key a task holds, that task's). An item may wait for
   * earlier items of the same call (`afterItems`: their indexes), so that a
   * graph of tasks is stored whole. */
  async pushItems(items) {
    if (items === null || typeof items !== 'object' || typeof items[Symbol.iterator] !== 'function') {
      throw new TypeError(`pushItems takes an iterable of items, not ${describe(items)}`);
    }
    const datas = [];
    const built = [];
    try {
      for (const item of items) {
        const index = datas.length;
        try {
          if (item === null || typeof item !== 'object' || Array.isArray(item) || ArrayBuffer.isView(item)) {
            throw new TypeError(`an item is an object { payload, ...options }, not ${describe(item)}`);
          }
          const { payload, ...options } = item;
          datas.push(encode(payload));
          built.push(pushOptions('pushItems', options));
        } catch (error) {
          error.message = `item ${index}: ${error.message}`;
          error.index = index;
          throw error;
        }
      }
      const count = datas.length;
      const ids = new BigInt64Array(Math.max(count, 1));
      const status = await this._call(lib.tq_push_items, datas.map(payloadPointer), lengths(datas), built, count, ids);
      if (status < 0) throw withIndex(asyncError(status, 'tq_push_items'), 'item', datas);
      return Array.from(ids.subarray(0, count), Number);
    } finally {
      for (const options of built) lib.tq_push_options_free(options);
    }
  }

  // --- Pulling ---------------------------------------------------------------

  /**
   * Claims the ready task first in line and resolves to it, or to null when
   * none is ready within `wait` milliseconds (default 0: no waiting).
   */
  pull(options = {}) {
    return this.#claim(options, 1).then((tasks) => tasks[0] ?? null);
  }

  /** Claims a ready task on the calling thread, for scripts, or returns
   * null; never waits for one (the event loop waits for the commit). */
  pullSync({ lease } = {}) {
    const built = pullOptions(lease, 0, null);
    try {
      const out = [null];
      const status = check(lib.tq_pull(this._handle(), built, out));
      return status === OK ? new Task(this, out[0]) : null;
    } finally {
      if (built) lib.tq_pull_options_free(built);
    }
  }

  /** Claims up to `n` ready tasks in one transaction; resolves to an array,
   * empty when none was ready within `wait`. */
  pullMany(n, options = {}) {
    try {
      integer('n', n, 1, 2 ** 32);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#claim(options, n);
  }

  /**
   * Every task as it becomes ready, for `for await`: each is claimed when
   * the loop asks for the next. Waits `wait` milliseconds (default
   * Infinity) for a task; the loop ends when none came in that time, when
   * `signal` aborts, or when the queue is closed.
   */
  async *tasks(options = {}) {
    const { wait = Infinity, lease, signal } = options;
    while (!this.#closing && !signal?.aborted) {
      let task;
      try {
        task = await this.pull({ wait, lease, signal });
      } catch (error) {
        if (signal?.aborted || error instanceof errors.ClosedError) {
          return;
        }
        throw error;
      }
      if (task === null) {
        return;
      }
      yield task;
    }
  }

  /** Claims up to `max` tasks: with a short call if some are ready, else
   * in the Queue's line of waiting pulls. Resolves to an array of Tasks. */
  async #claim(options, max) {
    const { wait = 0, lease, signal } = options;
    const waitMs = milliseconds('wait', wait);
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`signal must be an AbortSignal, not ${describe(signal)}`);
    }
    if (signal?.aborted) {
      throw signal.reason;
    }
    const built = pullOptions(lease, 0, null);
    try {
      const claimed =
        built === null && max === 1
          ? await this.#together('delivery', null, (entries) => this.#deliveriesTogether(entries))
          : await this.#pullAsync(built, max, (call) => this._call(...call));
      if (claimed === null) throw new errors.InterruptedError('tq_pull: ended by interrupt() on its queue');
      if (claimed.length || waitMs === 0) {
        return claimed;
      }
    } finally {
      if (built) lib.tq_pull_options_free(built);
    }
    if (signal?.aborted) {
      throw signal.reason;
    }
    const deadline = wait === Infinity ? Infinity : now() + wait;
    return new Promise((resolve, reject) => {
      const request = new WaitRequest(() => this.#waitFor(request, lease, deadline, max), signal, resolve, reject);
      if (signal) {
        const onAbort = () => {
          if (!request.active) {
            settle(request, () => reject(signal.reason));
          }
        };
        signal.addEventListener('abort', onAbort, { once: true });
        request.stopListening = () => signal.removeEventListener('abort', onAbort);
      }
      this.#line.push(request);
      this.#nextWait();
    });
  }

  /** Starts the waiting call of the first live request in line, if no
   * waiting call is in progress. */
  #nextWait() {
    while (!this.#waiting && this.#line.length) {
      const request = this.#line.shift();
      if (request.settled) {
        continue;
      }
      request.active = true;
      this.#waiting = request.run().then(
        (tasks) => settle(request, () => request.resolve(tasks)),
        (error) => settle(request, () => request.reject(error)),
      );
      this.#waiting.then(() => {
        this.#waiting = null;
        this.#nextWait();
      });
    }
  }

  /** The waiting call of one request: a claim first (a task may have come
   * while it was in line), then asynchronous pulls until a task comes, the
   * deadline passes, the signal aborts or the queue closes. */
  async #waitFor(request, lease, deadline, max) {
    const { signal } = request;
    const cancel = signal ? lib.tq_cancel_new() : null;
    const onAbort = () => lib.tq_cancel_trigger(cancel);
    let built = null;
    try {
      if (signal) {
        if (!cancel) throw new errors.InternalError('tq_cancel_new returned NULL');
        signal.addEventListener('abort', onAbort, { once: true });
      }
      for (;;) {
        if (this.#closing) throw this.#closedError();
        if (signal?.aborted) throw signal.reason;
        const ptr = this.#ptr;
        const lastsMs = startWaiting(ptr);
        const remaining = Math.max(0, Math.min(deadline - now(), lastsMs));
        if (built) lib.tq_pull_options_free(built);
        built = pullOptions(lease, remaining, cancel);
        const tasks = await this.#pullAsync(built, max, (call) => callAsync(call[0], ptr, ...call.slice(1))).finally(() =>
          stopWaiting(ptr, lastsMs),
        );
        if (tasks === null) {
          if (this.#closing) throw this.#closedError();
          if (signal?.aborted) throw signal.reason;
          throw new errors.InterruptedError('tq_pull: the wait was ended by interrupt() on its queue');
        }
        if (tasks.length || now() >= deadline) {
          return tasks;
        }
      }
    } finally {
      request.stopListening?.();
      if (signal) signal.removeEventListener('abort', onAbort);
      if (built) lib.tq_pull_options_free(built);
      if (cancel) lib.tq_cancel_free(cancel);
    }
  }

  /**
   * Finishes (without a result) the library task `ptr` of a held delivery,
   * in one of the Queue's places, together with the finishes and pulls
   * lined up meanwhile; resolves to the status tq_finish would have
   * returned. The caller keeps the task until it settles.
   */
  _finish(ptr) {
    return this.#together('delivery', ptr, (entries) => this.#deliveriesTogether(entries));
  }

  /**
   * Runs the finishes (an entry's value: the task) and the pulls with the
   * default lease (value null) lined up together: one alone as its own
   * call, pulls alone as #pullTogether does, else one
   * tq_finish_and_pull_batch that finishes every task and claims a ready
   * task for each pull, in one commit. A finish resolves to the status
   * tq_finish would have returned for it, CANCELLED and NOT_HELD told
   * apart; a pull as #pullTogether's.
   */
  async #deliveriesTogether(entries) {
    const finishes = entries.filter((entry) => entry.value !== null);
    const pulls = entries.filter((entry) => entry.value === null);
    if (finishes.length === 0) {
      return this.#pullTogether(pulls);
    }
    if (entries.length === 1) {
      finishes[0].resolve(await callAsync(lib.tq_finish, this.#ptr, finishes[0].value));
      return;
    }
    const pointers = new BigUint64Array(finishes.length);
    finishes.forEach((entry, i) => {
      pointers[i] = koffi.address(entry.value);
    });
    const statuses = new Int32Array(finishes.length);
    const slots = pulls.length ? new BigUint64Array(pulls.length) : null;
    const count = [0];
    const status = await callAsync(
      lib.tq_finish_and_pull_batch,
      this.#ptr,
      pointers,
      finishes.length,
      statuses,
      null,
      pulls.length,
      slots,
      count,
    );
    if (status < 0) {
      // Nothing was finished or claimed: each finish fails as its own
      // call would have, for the same reason.
      for (const entry of finishes) entry.resolve(status);
      const error = asyncError(status, 'tq_finish_and_pull_batch');
      for (const entry of pulls) entry.reject(error);
      return;
    }
    finishes.forEach((entry, i) => entry.resolve(statuses[i]));
    const tasks = status === OK ? adoptAll(this, slots, Number(count[0])) : [];
    pulls.forEach((entry, i) => entry.resolve(tasks.slice(i, i + 1)));
  }

  /** Claims a ready task for each of `entries`, pulls with the default
   * lease lined up together, in one tq_pull_batch; an entry left without
   * one gets none. Each resolves as #pullAsync does. */
  async #pullTogether(entries) {
    const run = (call) => callAsync(call[0], this.#ptr, ...call.slice(1));
    const tasks = await this.#pullAsync(null, entries.length, run);
    entries.forEach((entry, i) => entry.resolve(tasks === null ? null : tasks.slice(i, i + 1)));
  }

  /** One tq_pull or tq_pull_batch made by `run` (a short call or the
   * waiting one) from [function, ...arguments]; resolves to the tasks
   * (none when none came) or null when the wait was interrupted. */
  async #pullAsync(options, max, run) {
    const call = max === 1 ? 'tq_pull' : 'tq_pull_batch';
    if (max === 1) {
      const out = [null];
      const status = await run([lib.tq_pull, options, out]);
      if (status === INTERRUPTED) return null;
      return checkAsync(status, call) === OK ? [new Task(this, out[0])] : [];
    }
    const slots = new BigUint64Array(max);
    const count = [0];
    const status = await run([lib.tq_pull_batch, options, max, slots, count]);
    if (status === INTERRUPTED) return null;
    return checkAsync(status, call) === OK ? adoptAll(this, slots, Number(count[0])) : [];
  }

  // --- Outcomes --------------------------------------------------------------

  /** Task `id` of this queue as it is now, with its result and progress, as
   * a TaskSnapshot; null when the queue has no such task. */
  async task(id) {
    const out = [null];
    const status = await this._checkedCall(lib.tq_get_task, integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), out);
    return status === EMPTY ? null : adoptSnapshot(out[0]);
  }

  /**
   * Resolves to task `id` as it ended, a TaskSnapshot ('done' with its
   * result, 'dead' or 'cancelled' with its lastError), once it ends, or to
   * null when `timeout` milliseconds (default Infinity) passed first. A
   * task it saw not yet ended that then left the store (finished without a
   * result on a queue without history, cancelled there, or purged) has
   * ended too: it resolves to the task as last seen, 'done' without a
   * result.
   */
  async wait(id, options = {}) {
    integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    const { timeout = Infinity, signal } = callOptions('wait', options);
    milliseconds('timeout', timeout);
    checkSignal(signal);
    // A task that has ended, and an unknown one (rejected), answer at once.
    const out = [null];
    if ((await this._checkedCall(lib.tq_get_task, id, out)) === EMPTY) {
      throw noTaskToWaitFor(this.#name, id);
    }
    let fields, rawResult, rawProgress, steps;
    try {
      fields = readFields(out[0], false);
      rawResult = lib.tq_task_result(out[0]);
      rawProgress = lib.tq_task_progress(out[0]);
      steps = readSteps(out[0]);
    } finally {
      lib.tq_task_free(out[0]);
    }
    if (fields.state >= State.DONE) {
      return new TaskSnapshot(fields, rawResult, rawProgress, steps);
    }
    if (timeout === 0) {
      return null;
    }
    const gone = new TaskSnapshot({ ...fields, state: State.DONE, waitingFor: NO_IDS }, null, rawProgress);
    const look = async () => {
      try {
        return await this.#endedTask(id);
      } catch (error) {
        if (error instanceof errors.InvalidArgumentError) return gone;
        throw error;
      }
    };
    return this._watch(look, { signal, timeout });
  }

  /** A snapshot of task `id` if it has ended, else undefined. */
  async #endedTask(id) {
    const out = [null];
    const status = await this._call(lib.tq_wait_task, id, 0, null, out);
    // A look with no wait still says INTERRUPTED after interrupt().
    if (status === EMPTY || status === INTERRUPTED) return undefined;
    if (status === errors.InvalidArgumentError.status) {
      // Its other arguments were checked here, so the library refused the id.
      throw noTaskToWaitFor(this.#name, id);
    }
    checkAsync(status, 'tq_wait_task');
    return adoptSnapshot(out[0]);
  }

  /**
   * Waits, on the Queue's wait for changes, until `look()` (made of short
   * calls) resolves to something other than undefined, and resolves to
   * that; to null once `timeout` ms passed. Rejects with the signal's
   * reason when it aborts, with ClosedError when the queue closes, with
   * InterruptedError after interrupt() (once a last look found nothing),
   * or with the error of a look; a look refused for a while (BusyError,
   * IoError) is tried again when `retryBusy`. `started(watcher)` is told
   * of the watcher, whose `settle(value)` ends the wait from outside.
   */
  _watch(look, { signal, timeout = Infinity, retryBusy = false, started }) {
    return new Promise((resolve, reject) => {
      const watcher = {
        look,
        retryBusy,
        /** The look in progress (a Promise), if any. */
        looking: null,
        /** A change came during the look in progress: look once more. */
        lookAgain: false,
        /** Resolves with `value` or rejects with `error`, once. */
        settle: (value, error) => {
          if (!this.#watchers.delete(watcher)) return;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (error !== undefined) reject(error);
          else resolve(value);
          if (!this.#watchers.size) this.#changeWait?.stop();
        },
      };
      const onAbort = () => watcher.settle(undefined, signal.reason);
      const timer = timeout === Infinity ? undefined : setTimeout(() => watcher.settle(null), timeout);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#watchers.add(watcher);
      started?.(watcher);
      if (this.#changeWait) {
        // Its mark was taken before this look, so no change is missed.
        this.#lookAt(watcher);
      } else {
        this.#waitForChanges();
      }
    });
  }

  /** Reads again what `watcher` waits for, settling it if that came;
   * resolves once it looked. One look at a time per watcher. */
  #lookAt(watcher) {
    if (watcher.looking) {
      watcher.lookAgain = true;
      return watcher.looking;
    }
    watcher.looking = (async () => {
      let retryMs = FIRST_RETRY_MS;
      do {
        watcher.lookAgain = false;
        try {
          const found = await watcher.look();
          if (found !== undefined) watcher.settle(found);
        } catch (error) {
          // close() ends every watcher once the handle is freed.
          if (this.#closing) break;
          if (!(watcher.retryBusy && (error instanceof errors.BusyError || error instanceof errors.IoError))) {
            watcher.settle(undefined, error);
            break;
          }
          // Refused for a while: what it waits for may have come meanwhile.
          await new Promise((resolve) => setTimeout(resolve, retryMs));
          retryMs = Math.min(2 * retryMs, MAX_RETRY_MS);
          watcher.lookAgain = true;
        }
      } while (watcher.lookAgain && this.#watchers.has(watcher));
      watcher.looking = null;
    })();
    return watcher.looking;
  }

  /**
   * The wait for changes: while anyone waits, one tq_wait_change at a time
   * (a waiting call, on a worker thread of its own) on behalf of every
   * watcher, which looks again each time it returns. It takes the queue's
   * change mark before the first looks, so a change after any look ends
   * the next wait at once.
   */
  #waitForChanges() {
    if (this.#changeWait || this.#closing) return;
    const cancel = lib.tq_cancel_new();
    if (!cancel) {
      for (const watcher of this.#watchers) watcher.settle(undefined, new errors.InternalError('tq_cancel_new returned NULL'));
      return;
    }
    const run = { stopped: false, stop: () => ((run.stopped = true), lib.tq_cancel_trigger(cancel)) };
    this.#changeWait = run;
    const ptr = this.#ptr;
    const wait = async () => {
      let mark = 0;
      let first = true;
      let retryMs = FIRST_RETRY_MS;
      while (this.#watchers.size && !run.stopped) {
        if (this.#closing) break;
        const out = [0];
        const lastsMs = startWaiting(ptr);
        const timeoutMs = first ? 0 : lastsMs;
        first = false;
        const status = await this._track(callAsync(lib.tq_wait_change, ptr, mark, timeoutMs, cancel, out)).finally(() =>
          stopWaiting(ptr, lastsMs),
        );
        if (status === OK || status === EMPTY) {
          retryMs = FIRST_RETRY_MS;
          if (status === OK) {
            mark = out[0];
            for (const watcher of this.#watchers) this.#lookAt(watcher);
          }
        } else if (status === INTERRUPTED) {
          if (run.stopped || this.#closing) break;
          const error = new errors.InterruptedError('tq_wait_change: ended by interrupt() on its queue');
          // interrupt() ends the waits, but a wait still takes what came.
          await Promise.all([...this.#watchers].map((watcher) => this.#lookAt(watcher)));
          for (const watcher of this.#watchers) watcher.settle(undefined, error);
        } else if (status === BUSY || status === IO) {
          // An interrupt, a close or the last watcher leaving meanwhile
          // ends the next wait at once.
          await new Promise((resolve) => setTimeout(resolve, retryMs));
          retryMs = Math.min(2 * retryMs, MAX_RETRY_MS);
        } else {
          const error = asyncError(status, 'tq_wait_change');
          for (const watcher of this.#watchers) watcher.settle(undefined, error);
        }
      }
    };
    wait()
      .catch((error) => {
        for (const watcher of this.#watchers) watcher.settle(undefined, error);
      })
      .finally(() => {
        lib.tq_cancel_free(cancel);
        this.#changeWait = null;
        // Watchers that came after the last one left start a new wait.
        if (this.#watchers.size && !this.#closing) this.#waitForChanges();
      });
  }

  /** Keeps the handle open until `call`, an asynchronous C call using it,
   * settles (close() then waits for it); returns `call`. */
  _track(call) {
    const tracked = call.then(
      () => {},
      () => {},
    );
    this.#calls.add(tracked);
    tracked.then(() => this.#calls.delete(tracked));
    return call;
  }

  /** The error for a call after close() began. */
  _closedError() {
    return this.#closedError();
  }

  /** Finishes many tasks in one transaction; resolves, for each, to true
   * when it was finished and false when its delivery was no longer current. */
  async finishMany(tasks) {
    const [outcomes] = await this.#finishAndClaim('finishMany', tasks, 0, undefined);
    return outcomes.map((outcome) => outcome === null);
  }

  /** Finishes `tasks` as finishMany does and claims up to `n` ready tasks
   * as pullMany does, in one transaction (one commit): resolves to
   * `[finished, claimed]`. Never waits: when `claimed` is empty, wait with
   * pull(). `lease` applies to the tasks claimed. */
  async finishAndPullMany(tasks, n, { lease } = {}) {
    const [outcomes, claimed] = await this._finishAndClaim(tasks, n, lease);
    return [outcomes.map((outcome) => outcome === null), claimed];
  }

  /** finishAndPullMany for runWorker: resolves to `[outcomes, claimed]`,
   * each outcome null (finished) or what finish() would have thrown. */
  _finishAndClaim(tasks, n, lease) {
    try {
      integer('n', n, 0, 2 ** 32);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#finishAndClaim('finishAndPullMany', tasks, n, lease);
  }

  /** finishAndPullMany for `caller`, its outcomes as _finishAndClaim's;
   * `n` 0 only finishes. */
  async #finishAndClaim(caller, tasks, n, lease) {
    const list = [...tasks];
    const distinct = [...new Set(list)];
    for (const task of distinct) {
      if (!(task instanceof Task)) {
        throw new TypeError(`${caller} takes Task objects, not ${describe(task)}`);
      }
    }
    const live = [];
    for (const task of distinct) {
      const ended = task._ended();
      if (ended === null) {
        live.push(task);
      } else if (ended instanceof errors.ClosedError) {
        throw ended;
      }
    }
    this._handle();
    const statuses = new Int32Array(Math.max(live.length, 1));
    // Each task is kept until the call returned.
    let finished;
    const finishing = new Promise((resolve) => {
      finished = resolve;
    });
    const held = live.map((task) => task._using(() => finishing));
    let claimed = [];
    const built = n ? pullOptions(lease, 0, null) : null;
    try {
      const pointers = new BigUint64Array(Math.max(live.length, 1));
      live.forEach((task, i) => {
        pointers[i] = koffi.address(task._ptr());
      });
      // With n 0 it only finishes; unlike tq_finish_batch, it reports a
      // task cancelled meanwhile as CANCELLED.
      const slots = n ? new BigUint64Array(n) : null;
      const count = [0];
      await this._checkedCall(lib.tq_finish_and_pull_batch, pointers, live.length, statuses, built, n, slots, count);
      claimed = adoptAll(this, slots, Number(count[0]));
    } finally {
      if (built) lib.tq_pull_options_free(built);
      finished();
      await Promise.all(held);
    }
    const outcomes = new Map();
    live.forEach((task, i) => {
      if (statuses[i] === OK) {
        outcomes.set(task, null);
        task._end('finished');
      } else {
        task._end(statuses[i] === errors.CancelledError.status ? 'cancelled' : 'lost');
        outcomes.set(task, task._ended());
      }
    });
    // Tasks whose delivery had ended before were not held.
    return [list.map((task) => (outcomes.has(task) ? outcomes.get(task) : (task._ended() ?? new errors.NotHeldError(`task ${task.id} is no longer held`)))), claimed];
  }

  /** Ends the wait of every pull, wait() and watchCancellation() on this
   * handle with InterruptedError, now and from then on (a pull still takes
   * a task that is ready, a wait() still resolves to a task that has
   * ended). Never waits, so it is synchronous. */
  interrupt() {
    check(lib.tq_interrupt(this._handle()));
  }
}

// Queue's methods for its upkeep and control (admin.js) and its schedules
// (schedule.js), written beside what they answer.
for (const methods of [QueueAdmin, QueueSchedules]) {
  const descriptors = Object.getOwnPropertyDescriptors(methods.prototype);
  delete descriptors.constructor;
  Object.defineProperties(Queue.prototype, descriptors);
}

module.exports = { Queue, open, openSync };
