'use strict';
// Queue, Task and TaskSnapshot: libtq's objects in JavaScript.
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
// Pushes without options, and pulls with the default lease, that line up
// for a place meanwhile run together, in one tq_push_batch or
// tq_pull_batch.
//
// Threads. JavaScript calls on one Queue never overlap. worker_threads each
// load the package and open their own Queue; libtq's handle is thread-safe,
// so they may share a file as processes do.

const { CONSTANTS, lib, koffi } = require('./native');

const UNTIL_RESUMED = CONSTANTS.UNTIL_RESUMED;
const errors = require('./errors');

const OK = 0;
const EMPTY = 1;
const DUPLICATE = 2;
const INTERRUPTED = errors.InterruptedError.status;
const NOT_HELD = errors.NotHeldError.status;
const CANCELLED = errors.CancelledError.status;
const BUSY = errors.BusyError.status;
const IO = errors.IoError.status;

const UINT32_MAX = 2 ** 32 - 1;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const UINT64_MAX = 2n ** 64n - 1n;

/** The longest one waiting C call lasts, in milliseconds: a pull without a
 * bound (`wait: Infinity`) waits in calls of an hour, each of which starts
 * with a claim. */
const LONGEST_WAIT_MS = 3_600_000;

/** The longest a waiting call lasts, in milliseconds, while waiting calls
 * fill all of libuv's threads but one (see startWaiting). */
const CROWDED_WAIT_MS = 100;

/** How many short C calls (everything but the waiting ones) one Queue runs
 * at once on libuv's worker threads; more line up in JavaScript. Two keep
 * a commit going while the next call enters the library, where concurrent
 * writes of one handle share a transaction (group commit), yet leave
 * threads of the pool to the file system and other Queues. */
const CALLS_AT_ONCE = 2;

/** The threads of libuv's pool, which libuv sizes from UV_THREADPOOL_SIZE
 * (4 by default, at most 1024) when it first uses the pool. */
const POOL_THREADS = Math.min(Math.max(Number.parseInt(process.env.UV_THREADPOOL_SIZE, 10) || 4, 1), 1024);

/** The wait for changes that cannot look for now (BUSY: the file's write
 * lock held past the busy timeout; IO: on PostgreSQL, a connection cut or
 * a server restarting) tries again after these waits, doubling: what it
 * waits for is still to come. */
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2_000;

/** Values for `durability`: how far a write must reach before a call returns. */
const Durability = Object.freeze({ FULL: 0, NORMAL: 1 });
/** Values for count, list and purge: a task's states. */
const State = Object.freeze({ PENDING: 0, LEASED: 1, DONE: 2, DEAD: 3, CANCELLED: 4 });
const STATE_NAMES = ['pending', 'leased', 'done', 'dead', 'cancelled'];
/** Values for `onParentFailure`: what a task does when a task it waits for
 * ends dead or cancelled. */
const ParentFailure = Object.freeze({ CANCEL: 0, RUN_ANYWAY: 1 });
/** Values for a schedule's `catchUp`: what the slots that came due while
 * nothing drove the schedule become when something next does. */
const CatchUp = Object.freeze({ SKIP: 0, ONE: 1, EACH: 2 });
const CATCH_UP_NAMES = ['skip', 'one', 'each'];

/** Returns a non-negative status; throws the error for a negative one with
 * this thread's tq_last_error(). Call straight after the C call. */
function check(status) {
  if (status < 0) {
    throw errors.fromStatus(status, lib.tq_last_error());
  }
  return status;
}

/** The error for a negative status returned by an asynchronous call, whose
 * message stayed on the worker thread that made it. */
function asyncError(status, call) {
  return errors.fromStatus(status, `${call}: ${lib.tq_status_str(status)}`);
}

/** Returns a non-negative status of the asynchronous call `call`; throws
 * its error for a negative one. */
function checkAsync(status, call) {
  if (status < 0) {
    throw asyncError(status, call);
  }
  return status;
}

/** Runs the C function `fn` on one of libuv's worker threads; resolves to
 * what it returns. */
function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (error, value) => (error ? reject(error) : resolve(value)));
  });
}

/** The integer of an enumeration value given as a number (passed on for the
 * library to judge) or a member's name in any case, a name of several
 * words in camelCase ('runAnyway' for RUN_ANYWAY). */
function enumValue(kind, members, value) {
  if (typeof value === 'string') {
    const found = members[value.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()];
    if (found === undefined) {
      const names = Object.keys(members).map(camelCase);
      throw new errors.InvalidArgumentError(`unknown ${kind} ${JSON.stringify(value)}; expected one of ${names.join(', ')}`);
    }
    return found;
  }
  if (Number.isInteger(value)) {
    return value;
  }
  throw new TypeError(`${kind} must be a number or its name, not ${describe(value)}`);
}

/** 'RUN_ANYWAY' as 'runAnyway'. */
function camelCase(name) {
  return name.toLowerCase().replace(/_([a-z])/g, (_, letter) => letter.toUpperCase());
}

function describe(value) {
  return value === null ? 'null' : typeof value === 'object' ? value.constructor?.name ?? 'object' : typeof value;
}

/** Refuses a `signal` that is not an AbortSignal, or throws its reason
 * when it has aborted. */
function checkSignal(signal) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(`signal must be an AbortSignal, not ${describe(signal)}`);
  }
  if (signal?.aborted) {
    throw signal.reason;
  }
}

/** An integer argument within the C type's range [low, high]. */
function integer(name, value, low, high) {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    if (typeof value === 'number') {
      throw new errors.InvalidArgumentError(`${name} must be an integer, not ${value}`);
    }
    throw new TypeError(`${name} must be an integer, not ${describe(value)}`);
  }
  if (value < low || value > high) {
    throw new errors.InvalidArgumentError(`${name} must be between ${low} and ${high}, not ${value}`);
  }
  return value;
}

/** A duration in milliseconds (a number at least 0) as whole milliseconds
 * for a uint64_t argument, rounded up so that a short positive duration
 * does not become 0; Infinity becomes UINT64_MAX, for the library to
 * refuse as out of range where it has a bound. */
function milliseconds(name, value) {
  if (typeof value !== 'number') {
    throw new TypeError(`${name} must be a number of milliseconds, not ${describe(value)}`);
  }
  if (Number.isNaN(value) || value < 0) {
    throw new errors.InvalidArgumentError(`${name} must be at least 0 milliseconds, not ${value}`);
  }
  return value === Infinity ? UINT64_MAX : Math.ceil(value);
}

/** A NUL-terminated C string from a JavaScript string. */
function cString(name, value) {
  if (typeof value !== 'string') {
    throw new TypeError(`${name} must be a string, not ${describe(value)}`);
  }
  if (!value.isWellFormed()) {
    throw new errors.InvalidArgumentError(`${name} ${JSON.stringify(value)} has a lone surrogate, which UTF-8 cannot carry`);
  }
  if (value.includes('\0')) {
    throw new errors.InvalidArgumentError(`${name} ${JSON.stringify(value)} contains a NUL character`);
  }
  return value;
}

/** The JSON text of a payload, as bytes: a Buffer or typed array as given,
 * a string as given (in UTF-8), anything else through JSON.stringify. */
function encode(payload) {
  if (typeof payload === 'string') {
    if (!payload.isWellFormed()) {
      throw new errors.InvalidArgumentError('the payload string has a lone surrogate, which UTF-8 cannot carry');
    }
    return Buffer.from(payload, 'utf8');
  }
  if (Buffer.isBuffer(payload)) {
    return payload;
  }
  if (ArrayBuffer.isView(payload)) {
    return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  }
  const text = JSON.stringify(payload);
  if (text === undefined) {
    throw new TypeError(`a payload must be JSON, a string of JSON or a Buffer, not ${describe(payload)}`);
  }
  return Buffer.from(text, 'utf8');
}

/** The JSON text of a result or progress as a NUL-terminated Buffer: the
 * value as encode() makes a payload of it. A NUL byte, which no JSON text
 * has, is refused rather than cutting the text short. */
function jsonText(name, value) {
  const data = encode(value);
  const at = data.indexOf(0);
  if (at >= 0) {
    throw new errors.InvalidJsonError(`the ${name} contains a NUL byte (at byte ${at})`);
  }
  return Buffer.concat([data, NUL]);
}

const NUL = Buffer.from([0]);

/** The options object of a call, refusing anything else: a result passed
 * as finish(result) instead of finish({ result }) must not be dropped. */
function callOptions(call, options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options) || ArrayBuffer.isView(options)) {
    throw new TypeError(`${call} takes an options object, not ${describe(options)}`);
  }
  return options;
}

/** A failure reason for tq_fail: a string, an Error (as "Name: message") or
 * undefined. Any text is kept: a NUL, which a C string cannot carry, is
 * written as "\u0000", and a lone surrogate becomes U+FFFD. */
function reasonText(reason) {
  if (reason === undefined || reason === null) {
    return null;
  }
  if (reason instanceof Error) {
    reason = `${reason.name}: ${reason.message}`;
  } else if (typeof reason !== 'string') {
    throw new TypeError(`reason must be a string or an Error, not ${describe(reason)}`);
  }
  return reason.replaceAll('\0', '\\u0000').toWellFormed();
}

/** `location` as messages show it: a URL without its password
 * (tq_location_redacted), a file path unchanged. */
function redacted(location) {
  const length = [0];
  check(lib.tq_location_redacted(location, null, 0, length));
  const shown = Buffer.alloc(Number(length[0]) + 1);
  check(lib.tq_location_redacted(location, shown, shown.length, length));
  return shown.toString('utf8', 0, Number(length[0]));
}

/** A new options object made by `create`, with each [setter, ...values] of
 * `settings` applied; freed with `free` if a setter refuses its value. */
function buildOptions(create, free, settings) {
  const options = create();
  if (!options) {
    throw new errors.InternalError(`${create.info.name} returned NULL`);
  }
  try {
    for (const [setter, ...values] of settings) {
      check(setter(options, ...values));
    }
  } catch (error) {
    free(options);
    throw error;
  }
  return options;
}

/** The integers of an array argument (ids, indexes), each in [low, high]. */
function integers(name, values, low, high) {
  if (!Array.isArray(values)) {
    throw new TypeError(`${name} must be an array, not ${describe(values)}`);
  }
  return values.map((value, i) => integer(`${name}[${i}]`, value, low, high));
}

/** The push options' setters and values for `options` of the method `call`
 * (pushMany takes no unique key). */
function pushSettings(call, options) {
  const allowUnique = call !== 'pushMany';
  const { delay, runAt, priority, maxAttempts, uniqueKey, uniqueFor, after, afterItems, onParentFailure, group, groupMax } =
    callOptions(call, options);
  const settings = [];
  if (group !== undefined) {
    const limit = groupMax === undefined ? 1 : integer('groupMax', groupMax, 0, UINT32_MAX);
    settings.push([lib.tq_push_options_set_group, cString('group', group), limit]);
  } else if (groupMax !== undefined) {
    throw new errors.InvalidArgumentError('groupMax needs a group: give group too');
  }
  for (const id of after === undefined ? [] : integers('after', after, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)) {
    settings.push([lib.tq_push_options_add_after, id]);
  }
  // Only pushItems takes them; the library refuses them elsewhere, with its message.
  for (const index of afterItems === undefined ? [] : integers('afterItems', afterItems, 0, Number.MAX_SAFE_INTEGER)) {
    settings.push([lib.tq_push_options_add_after_item, index]);
  }
  if (onParentFailure !== undefined) {
    settings.push([lib.tq_push_options_set_on_parent_failure, enumValue('onParentFailure', ParentFailure, onParentFailure)]);
  }
  if (delay !== undefined && runAt !== undefined) {
    throw new errors.InvalidArgumentError('give delay or runAt, not both');
  }
  if (delay !== undefined) {
    settings.push([lib.tq_push_options_set_delay_ms, milliseconds('delay', delay)]);
  }
  if (runAt !== undefined) {
    const ms = runAt instanceof Date ? runAt.getTime() : runAt;
    if (typeof ms !== 'number' || !Number.isFinite(ms)) {
      throw new errors.InvalidArgumentError(`runAt must be a Date or milliseconds since the epoch, not ${runAt}`);
    }
    settings.push([lib.tq_push_options_set_run_at_unix_ms, Math.round(ms)]);
  }
  if (priority !== undefined) {
    settings.push([lib.tq_push_options_set_priority, integer('priority', priority, INT32_MIN, INT32_MAX)]);
  }
  if (maxAttempts !== undefined) {
    settings.push([lib.tq_push_options_set_max_attempts, integer('maxAttempts', maxAttempts, 0, UINT32_MAX)]);
  }
  if (!allowUnique && (uniqueKey !== undefined || uniqueFor !== undefined)) {
    throw new errors.InvalidArgumentError('pushMany takes no unique key: a key names one task');
  }
  if (uniqueKey !== undefined) {
    settings.push([lib.tq_push_options_set_unique_key, cString('uniqueKey', uniqueKey)]);
  }
  if (uniqueFor !== undefined) {
    // Without a key the library refuses the window, with its message.
    settings.push([lib.tq_push_options_set_unique_for_ms, milliseconds('uniqueFor', uniqueFor)]);
  }
  return settings;
}

/** The push options built for `options` of the method `call`. */
function pushOptions(call, options) {
  return buildOptions(lib.tq_push_options_new, lib.tq_push_options_free, pushSettings(call, options));
}

/** The byte lengths of encoded payloads, for the C array beside them. */
function lengths(datas) {
  const lens = new BigUint64Array(Math.max(datas.length, 1));
  datas.forEach((data, i) => {
    lens[i] = BigInt(data.length);
  });
  return lens;
}

/** `error`, a batch's failure, with the position of the payload (or item:
 * `kind`) it was for. The library's message naming it stayed on the worker
 * thread, so for invalid JSON the first payload that is not JSON is found
 * again here; for other failures the position is unknown. */
function withIndex(error, kind, datas) {
  if (error instanceof errors.InvalidJsonError) {
    const index = datas.findIndex((data) => !isJson(data));
    if (index >= 0) {
      error.message = `${kind} ${index}: ${error.message}`;
      error.index = index;
    }
  }
  return error;
}

/** Whether the bytes are a JSON text. */
function isJson(data) {
  try {
    JSON.parse(data.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** Passed, with a length of 0, for an empty payload: koffi passes an empty
 * Buffer as NULL, and the library is to judge the empty text, not refuse a
 * NULL pointer. */
const EMPTY_TEXT = Buffer.from(' ');

/** The bytes to pass for a payload's encoded `data`. */
function payloadPointer(data) {
  return data.length ? data : EMPTY_TEXT;
}

/** Frees a handle that its Queue object never closed. */
const unclosedQueues = new FinalizationRegistry((ptr) => lib.tq_close(ptr));
/** Frees a task that its Task object never ended or closed. */
const unfreedTasks = new FinalizationRegistry((ptr) => lib.tq_task_free(ptr));

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
  /** Pushes and pulls lined up for a place, by kind ('push', 'pull'), that
   * one batch call will run together: arrays of { value, resolve, reject }. */
  #batches = new Map();
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
   * Resolves to what `runTogether` gives `value`: calls of one `kind` that
   * wait for a place meanwhile are run together, by one call of
   * `runTogether(entries)` in one place, which settles each entry. A call
   * that finds a place free runs at once, alone: batching adds no wait.
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
        this.#inPlace(() => {
          // Calls from now on line up for the next batch.
          this.#batches.delete(kind);
          return runTogether(lined);
        }).catch((error) => {
          for (const entry of lined) entry.reject(error);
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
  async #read(fn, ...args) {
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
   * for a payload (all or none), each alone, so that only that push fails. */
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
      if (status !== errors.InvalidJsonError.status && status !== errors.InvalidArgumentError.status) {
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

  /** Pushes with a unique key; resolves to { id, created }. */
  async pushUnique(payload, uniqueKey, options = {}) {
    if (typeof uniqueKey !== 'string') {
      throw new TypeError(`uniqueKey must be a string, not ${describe(uniqueKey)}`);
    }
    const data = encode(payload);
    const built = pushOptions('pushUnique', { ...callOptions('pushUnique', options), uniqueKey });
    const out = [0];
    try {
      const status = await this._checkedCall(lib.tq_push, payloadPointer(data), data.length, built, out);
      return { id: out[0], created: status !== DUPLICATE };
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
          ? await this.#together('pull', null, (entries) => this.#pullTogether(entries))
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
    let fields, rawResult, rawProgress;
    try {
      fields = readFields(out[0], false);
      rawResult = lib.tq_task_result(out[0]);
      rawProgress = lib.tq_task_progress(out[0]);
    } finally {
      lib.tq_task_free(out[0]);
    }
    if (fields.state >= State.DONE) {
      return new TaskSnapshot(fields, rawResult, rawProgress);
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
      if (n) {
        const slots = new BigUint64Array(n);
        const count = [0];
        await this._checkedCall(lib.tq_finish_and_pull_batch, pointers, live.length, statuses, built, n, slots, count);
        claimed = adoptAll(this, slots, Number(count[0]));
      } else {
        await this._checkedCall(lib.tq_finish_batch, pointers, live.length, statuses);
      }
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

  // --- Upkeep and visibility -------------------------------------------------

  /** Takes back the tasks of expired leases and dead holders; resolves to
   * how many. */
  async recover() {
    return Number(await this.#read(lib.tq_recover));
  }

  /** How many tasks of this queue are in `state` (a State value or its name). */
  async count(state = State.PENDING) {
    return Number(await this.#read(lib.tq_count, enumValue('state', State, state)));
  }

  /** The number of tasks in each state, by the state's lower-case name. */
  async counts() {
    const counts = await Promise.all(STATE_NAMES.map((name, value) => this.count(value)));
    return Object.fromEntries(STATE_NAMES.map((name, value) => [name, counts[value]]));
  }

  /** How long, in milliseconds, the task ready longest has waited, or null
   * when no task is ready. */
  async oldestReadyAge() {
    const out = [0];
    const status = await this._checkedCall(lib.tq_oldest_ready_age_ms, out);
    return status === EMPTY ? null : Number(out[0]);
  }

  /** How many ordered groups of this queue have tasks waiting for their turn
   * behind the group's earlier tasks; those tasks count as pending. */
  async groupsWaiting() {
    return Number(await this.#read(lib.tq_groups_waiting));
  }

  /** A page of this queue's tasks in `state`, by id, as TaskSnapshots. */
  async list(state = State.PENDING, { afterId = 0, limit = 100 } = {}) {
    const value = enumValue('state', State, state);
    integer('afterId', afterId, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    integer('limit', limit, 0, 2 ** 32);
    const slots = new BigUint64Array(Math.max(limit, 1));
    const count = [0];
    await this._checkedCall(lib.tq_list, value, afterId, limit, slots, count);
    const snapshots = [];
    const listed = Number(count[0]);
    for (let i = 0; i < listed; i++) {
      const ptr = koffi.decode(slots, i * 8, 'tq_task *');
      try {
        snapshots.push(snapshotOf(ptr));
      } finally {
        lib.tq_task_free(ptr);
      }
    }
    // A task not copied because of an error above is freed too.
    for (let i = snapshots.length + 1; i < listed; i++) {
      lib.tq_task_free(koffi.decode(slots, i * 8, 'tq_task *'));
    }
    return snapshots;
  }

  /** Every task of this queue in `state`, by id, read `pageSize` at a time,
   * for `for await`. */
  async *iterTasks(state = State.PENDING, { pageSize = 100 } = {}) {
    integer('pageSize', pageSize, 1, 2 ** 32);
    let afterId = 0;
    for (;;) {
      const page = await this.list(state, { afterId, limit: pageSize });
      yield* page;
      if (page.length < pageSize) return;
      afterId = page[page.length - 1].id;
    }
  }

  /** Makes the dead task `id` pending again, with all its attempts ahead. */
  async retryDead(id) {
    await this._checkedCall(lib.tq_retry_dead, integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
  }

  /** Makes every dead task pending again; resolves to how many. */
  async retryAllDead() {
    return Number(await this.#read(lib.tq_retry_all_dead));
  }

  /** Deletes the tasks in `state` ('done', 'dead' or 'cancelled') older than
   * `olderThan` milliseconds (0: all); resolves to how many. */
  async purge({ state = State.DONE, olderThan = 0 } = {}) {
    return Number(await this.#read(lib.tq_purge, enumValue('state', State, state), milliseconds('olderThan', olderThan)));
  }

  /** Checkpoints the write-ahead log; resolves to its size afterwards in bytes. */
  async checkpoint() {
    return Number(await this.#read(lib.tq_checkpoint));
  }

  /** The size of the file's write-ahead log in bytes. */
  async walSize() {
    return Number(await this.#read(lib.tq_wal_size));
  }

  // --- Control ---------------------------------------------------------------

  /** Cancels task `id`, keeping `reason` as its last error; resolves to
   * 'cancelled' (it left the line) or 'leased' (its holder learns of it at
   * its next call on the delivery). */
  async cancelTask(id, reason) {
    const text = reasonText(reason);
    const state = await this.#read(lib.tq_cancel_task, integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), text);
    return STATE_NAMES[state];
  }

  /** Pauses this queue for every process until resume() or `until` (a Date
   * or milliseconds since the epoch, in the future; Infinity, the default,
   * for no end). */
  async pause(until = Infinity) {
    let untilMs;
    if (until === Infinity) {
      untilMs = UNTIL_RESUMED;
    } else {
      untilMs = until instanceof Date ? until.getTime() : until;
      if (typeof untilMs !== 'number' || !Number.isFinite(untilMs)) {
        throw new errors.InvalidArgumentError(`until must be a Date, milliseconds since the epoch or Infinity, not ${until}`);
      }
    }
    await this._checkedCall(lib.tq_pause, typeof untilMs === 'bigint' ? untilMs : Math.round(untilMs));
  }

  /** Ends this queue's pause, if any, and wakes its waiting pulls. */
  async resume() {
    await this._checkedCall(lib.tq_resume);
  }

  /** When this queue's pause ends: a Date, Infinity for a pause with no
   * end, or null when it is not paused. */
  async pausedUntil() {
    const until = BigInt(await this.#read(lib.tq_paused_until));
    if (until === 0n) return null;
    return until === UNTIL_RESUMED ? Infinity : new Date(Number(until));
  }

  /** Limits this queue to `limit` tasks leased at once across every
   * process (at least 1); null removes the limit. */
  async setConcurrencyLimit(limit) {
    if (limit === null) {
      await this._checkedCall(lib.tq_clear_concurrency_limit);
    } else {
      await this._checkedCall(lib.tq_set_concurrency_limit, integer('limit', limit, 0, UINT32_MAX));
    }
  }

  /** This queue's concurrency limit, or null when it has none. */
  async concurrencyLimit() {
    return (await this.#read(lib.tq_concurrency_limit)) || null;
  }

  /** Allows at most `claims` deliveries of this queue in any window of
   * `perMs` milliseconds, across every process, without a coordinator; a
   * pull finds nothing while the window's claims are spent. null removes
   * the limit. */
  async setRateLimit(claims, perMs) {
    if (claims === null) {
      await this._checkedCall(lib.tq_clear_rate_limit);
    } else {
      await this._checkedCall(lib.tq_set_rate_limit, integer('claims', claims, 0, UINT32_MAX), milliseconds('perMs', perMs));
    }
  }

  /** This queue's rate limit as `{ claims, perMs }`, or null when it has none. */
  async rateLimit() {
    const claims = [0];
    const perMs = [0];
    await this._checkedCall(lib.tq_rate_limit, claims, perMs);
    return claims[0] ? { claims: claims[0], perMs: Number(perMs[0]) } : null;
  }

  // --- Schedules -------------------------------------------------------------

  /** Adds to this queue the schedule `name`, which enqueues a task of
   * `payload` (taken as push takes it) at every slot of `options.cron` or
   * `options.every`, the first one after now. */
  async addSchedule(name, payload, options) {
    await this.#putSchedule('addSchedule', lib.tq_schedule_add, name, payload, options);
  }

  /** As addSchedule, overwriting a schedule of the same name: its next slot
   * is computed afresh and it is no longer paused. */
  async replaceSchedule(name, payload, options) {
    await this.#putSchedule('replaceSchedule', lib.tq_schedule_replace, name, payload, options);
  }

  /** Declares a schedule, as an application does at every start: as
   * addSchedule, or an update of the schedule of the same name that keeps
   * its next slot while its timing (cron or every, time zone, catch-up) is
   * unchanged, so that a restart neither delays an interval's slot nor
   * skips a due slot. A changed timing's next slot is computed afresh; a
   * paused schedule stays paused. */
  async upsertSchedule(name, payload, options) {
    await this.#putSchedule('upsertSchedule', lib.tq_schedule_upsert, name, payload, options);
  }

  async #putSchedule(call, put, name, payload, options) {
    const settings = scheduleSettings(call, options);
    const text = cString('name', name);
    const data = encode(payload);
    const built = buildOptions(lib.tq_schedule_options_new, lib.tq_schedule_options_free, settings);
    try {
      await this._checkedCall(put, text, payloadPointer(data), data.length, built);
    } finally {
      lib.tq_schedule_options_free(built);
    }
  }

  /** This queue's schedules, by name, as plain objects. */
  async schedules() {
    const page = 100;
    const listed = [];
    let after = null;
    for (;;) {
      const slots = new BigUint64Array(page);
      const count = [0];
      await this._checkedCall(lib.tq_schedules, after, page, slots, count);
      const n = Number(count[0]);
      try {
        for (let i = 0; i < n; i++) listed.push(readSchedule(koffi.decode(slots, i * 8, 'tq_schedule *')));
      } finally {
        for (let i = 0; i < n; i++) lib.tq_schedule_free(koffi.decode(slots, i * 8, 'tq_schedule *'));
      }
      if (n < page) return listed;
      after = listed[listed.length - 1].name;
    }
  }

  /** Deletes the schedule `name` (the tasks it enqueued stay). */
  async removeSchedule(name) {
    await this._checkedCall(lib.tq_schedule_remove, cString('name', name));
  }

  /** Pauses the schedule `name`: its slots are skipped until resumeSchedule. */
  async pauseSchedule(name) {
    await this._checkedCall(lib.tq_schedule_pause, cString('name', name));
  }

  /** Resumes the schedule `name` from its first slot from now on. */
  async resumeSchedule(name) {
    await this._checkedCall(lib.tq_schedule_resume, cString('name', name));
  }

  /** Enqueues the task of every due slot of this queue's schedules;
   * resolves to how many it stored. Pulls do it by themselves. */
  async runDueSchedules() {
    return Number(await this.#read(lib.tq_run_due_schedules));
  }
}

/** The schedule options' setters and values for `options` of the method
 * `call`. cron and every may be null, as schedules() lists the one not
 * used, so that a listed schedule can be given back. */
function scheduleSettings(call, options) {
  const { cron, every, timeZone, priority, maxAttempts, catchUp, catchUpLimit } = callOptions(call, options ?? {});
  const hasCron = cron !== undefined && cron !== null;
  if (hasCron === (every !== undefined && every !== null)) {
    throw new errors.InvalidArgumentError(`${call} takes cron or every, exactly one of them`);
  }
  const settings = [];
  if (hasCron) {
    settings.push([lib.tq_schedule_options_set_cron, cString('cron', cron)]);
  } else {
    settings.push([lib.tq_schedule_options_set_every_ms, milliseconds('every', every)]);
  }
  if (timeZone !== undefined) {
    settings.push([lib.tq_schedule_options_set_time_zone, cString('timeZone', timeZone)]);
  }
  if (priority !== undefined) {
    settings.push([lib.tq_schedule_options_set_priority, integer('priority', priority, INT32_MIN, INT32_MAX)]);
  }
  if (maxAttempts !== undefined) {
    settings.push([lib.tq_schedule_options_set_max_attempts, integer('maxAttempts', maxAttempts, 0, UINT32_MAX)]);
  }
  if (catchUp !== undefined) {
    // The library ignores the limit for any policy but 'each'.
    const limit = catchUpLimit === undefined ? 1 : integer('catchUpLimit', catchUpLimit, 0, UINT32_MAX);
    settings.push([lib.tq_schedule_options_set_catch_up, enumValue('catchUp', CatchUp, catchUp), limit]);
  } else if (catchUpLimit !== undefined) {
    throw new errors.InvalidArgumentError("catchUpLimit needs catchUp: give catchUp 'each' too");
  }
  return settings;
}

/** A listed schedule, copied out of the library's object. */
function readSchedule(ptr) {
  const cron = lib.tq_schedule_cron(ptr);
  const raw = lib.tq_schedule_payload(ptr, null);
  const limit = [0];
  const catchUp = lib.tq_schedule_catch_up(ptr, limit);
  return {
    name: lib.tq_schedule_name(ptr),
    cron,
    every: cron === null ? Number(lib.tq_schedule_every_ms(ptr)) : null,
    timeZone: lib.tq_schedule_time_zone(ptr),
    raw,
    payload: JSON.parse(raw),
    priority: lib.tq_schedule_priority(ptr),
    maxAttempts: lib.tq_schedule_max_attempts(ptr),
    catchUp: CATCH_UP_NAMES[catchUp],
    catchUpLimit: limit[0],
    paused: lib.tq_schedule_paused(ptr),
    nextSlot: new Date(Number(lib.tq_schedule_next_slot_unix_ms(ptr))),
  };
}

function openSettings(options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`options must be an object, not ${describe(options)}`);
  }
  const settings = [];
  const {
    queue,
    durability,
    busyTimeout,
    keepHistory,
    maxPayloadLen,
    maxAttempts,
    retryBackoff,
    poolSize,
    postgresSchema,
    resultRetention,
  } = options;
  if (queue !== undefined) settings.push([lib.tq_options_set_queue, cString('queue', queue)]);
  if (durability !== undefined) {
    settings.push([lib.tq_options_set_durability, enumValue('durability', Durability, durability)]);
  }
  if (busyTimeout !== undefined) {
    settings.push([lib.tq_options_set_busy_timeout_ms, milliseconds('busyTimeout', busyTimeout)]);
  }
  if (keepHistory !== undefined) settings.push([lib.tq_options_set_keep_history, Boolean(keepHistory)]);
  if (resultRetention !== undefined) {
    settings.push([lib.tq_options_set_result_retention_ms, milliseconds('resultRetention', resultRetention)]);
  }
  if (maxPayloadLen !== undefined) {
    settings.push([lib.tq_options_set_max_payload_len, integer('maxPayloadLen', maxPayloadLen, 0, Number.MAX_SAFE_INTEGER)]);
  }
  if (maxAttempts !== undefined) {
    settings.push([lib.tq_options_set_max_attempts, integer('maxAttempts', maxAttempts, 0, UINT32_MAX)]);
  }
  if (retryBackoff !== undefined) {
    const { min, max } = retryBackoff ?? {};
    settings.push([lib.tq_options_set_retry_backoff_ms, milliseconds('retryBackoff.min', min), milliseconds('retryBackoff.max', max)]);
  }
  if (poolSize !== undefined) settings.push([lib.tq_options_set_pool_size, integer('poolSize', poolSize, 0, UINT32_MAX)]);
  if (postgresSchema !== undefined) {
    settings.push([lib.tq_options_set_postgres_schema, cString('postgresSchema', postgresSchema)]);
  }
  return settings;
}

/** Pull options for a lease, a wait and a cancel object, or null for the
 * defaults. */
function pullOptions(lease, waitMs, cancel) {
  const settings = [];
  if (lease !== undefined) settings.push([lib.tq_pull_options_set_lease_ms, milliseconds('lease', lease)]);
  if (waitMs) settings.push([lib.tq_pull_options_set_wait_ms, Math.ceil(waitMs)]);
  if (cancel) settings.push([lib.tq_pull_options_set_cancel, cancel]);
  return settings.length ? buildOptions(lib.tq_pull_options_new, lib.tq_pull_options_free, settings) : null;
}

/** Runs `action` unless the request was settled already. */
function settle(request, action) {
  if (!request.settled) {
    request.settled = true;
    request.stopListening?.();
    action();
  }
}

/** Tasks owning the first `count` pointers of `slots`; if making one fails,
 * the pointers not yet owned by a task are freed. */
function adoptAll(queue, slots, count) {
  const tasks = [];
  try {
    for (let i = 0; i < count; i++) {
      tasks.push(new Task(queue, koffi.decode(slots, i * 8, 'tq_task *')));
    }
  } catch (error) {
    for (let i = tasks.length + 1; i < count; i++) {
      lib.tq_task_free(koffi.decode(slots, i * 8, 'tq_task *'));
    }
    throw error;
  }
  return tasks;
}

const NO_IDS = Object.freeze([]);

/** A task's fields, copied out of the library. The library fills parents
 * for a pulled task only, and waitingFor and group for a listed one only,
 * so only those are read. */
function readFields(ptr, pulled) {
  return {
    id: lib.tq_task_id(ptr),
    raw: lib.tq_task_payload(ptr, null),
    attempts: lib.tq_task_attempts(ptr),
    priority: lib.tq_task_priority(ptr),
    maxAttempts: lib.tq_task_max_attempts(ptr),
    runAtMs: lib.tq_task_run_at_unix_ms(ptr),
    lastError: lib.tq_task_last_error(ptr),
    state: lib.tq_task_state(ptr),
    parents: pulled ? readIds(lib.tq_task_parents, ptr) : NO_IDS,
    waitingFor: pulled ? NO_IDS : readIds(lib.tq_task_waiting_for, ptr),
    group: pulled ? null : lib.tq_task_group(ptr),
  };
}

/** The ids the task's `accessor` (tq_task_parents, tq_task_waiting_for)
 * lists, as a frozen array. */
function readIds(accessor, ptr) {
  const count = [0];
  const ids = accessor(ptr, count);
  const n = Number(count[0]);
  return n ? Object.freeze(Array.from(koffi.decode(ids, 'int64_t', n), Number)) : NO_IDS;
}

/** The fields a pulled task and a listed snapshot share, all read-only. */
class TaskFields {
  #fields;
  #payload;
  #parsed = false;

  constructor(fields) {
    this.#fields = fields;
  }

  /** The id push returned. */
  get id() {
    return this.#fields.id;
  }
  /** The payload's JSON text, exactly as pushed. */
  get raw() {
    return this.#fields.raw;
  }
  /** The payload parsed from JSON (on first use). */
  get payload() {
    if (!this.#parsed) {
      this.#payload = JSON.parse(this.#fields.raw);
      this.#parsed = true;
    }
    return this.#payload;
  }
  /** How many times the task was claimed, this delivery included. */
  get attempts() {
    return this.#fields.attempts;
  }
  /** The task's priority. */
  get priority() {
    return this.#fields.priority;
  }
  /** How many deliveries the task gets before a failure makes it dead. */
  get maxAttempts() {
    return this.#fields.maxAttempts;
  }
  /** When the task became (or becomes) ready. */
  get runAt() {
    return new Date(this.#fields.runAtMs);
  }
  /** Why the previous delivery ended, or null. */
  get lastError() {
    return this.#fields.lastError;
  }
  /** The task's state when it was pulled ('leased') or listed. */
  get state() {
    return STATE_NAMES[this.#fields.state];
  }
  /** For a pulled task, the ids of the tasks it was pushed to wait for
   * (`after`), ascending: each has ended. Empty for a snapshot. */
  get parents() {
    return this.#fields.parents;
  }
  /** For a snapshot, the ids of the tasks it still waits for, ascending:
   * empty unless it is pending and blocked. Empty for a pulled task. */
  get waitingFor() {
    return this.#fields.waitingFor;
  }
  /** For a snapshot, the ordered group it was pushed to (`group`), or
   * null. Null for a pulled task. */
  get group() {
    return this.#fields.group;
  }
}

/** One delivery of a task, as a pull returns it. */
class Task extends TaskFields {
  #queue;
  #ptr;
  /** null while the delivery is held, else the error a further call throws. */
  #ended = null;
  /** The C calls in progress that use the library's task: it is freed
   * once the delivery ended and none is left. */
  #callsUsingTask = 0;
  /** Ends the running watchCancellation with 'ended', if any. */
  #endWatch = null;

  /** Takes ownership of `ptr` (from tq_pull); not for direct use. */
  constructor(queue, ptr) {
    let fields;
    try {
      fields = readFields(ptr, true);
    } catch (error) {
      lib.tq_task_free(ptr);
      throw error;
    }
    super(fields);
    this.#queue = queue;
    this.#ptr = ptr;
    unfreedTasks.register(this, ptr, this);
  }

  /** True once the delivery ended: finished, failed, lost or closed. */
  get closed() {
    return this.#ended !== null;
  }

  /** Completes this delivery, keeping `result` (when given) for
   * Queue.task and Queue.wait to read. */
  async finish(options = {}) {
    const { result } = callOptions('finish', options);
    if (result === undefined) {
      await this.#settle('finished', lib.tq_finish);
    } else {
      await this.#settle('finished', lib.tq_finish_with_result, jsonText('result', result));
    }
  }

  /** finish() on the calling thread, for scripts: the event loop waits for
   * the commit (and for the file's write lock, up to the busy timeout). */
  finishSync() {
    const status = lib.tq_finish(this.#queue._handle(), this._ptr());
    this.#conclude(status, 'finished', () => lib.tq_last_error());
  }

  /** Ends this delivery as failed, keeping `reason` as its last error. */
  async fail(reason) {
    await this.#settle('failed', lib.tq_fail, reasonText(reason));
  }

  /** Renews the lease: it now expires `lease` milliseconds from now; with
   * `progress`, records it for Queue.task to read. */
  async extend(lease, options = {}) {
    const leaseMs = milliseconds('lease', lease);
    const { progress } = callOptions('extend', options);
    if (progress === undefined) {
      await this.#settle(null, lib.tq_extend, leaseMs);
    } else {
      await this.#settle(null, lib.tq_extend_with_progress, leaseMs, jsonText('progress', progress));
    }
  }

  /** Hands this delivery back: the task runs again `delay` milliseconds
   * from now (default 0), and this delivery does not count as an attempt. */
  async snooze(delay = 0) {
    await this.#settle('snoozed', lib.tq_snooze, milliseconds('delay', delay));
  }

  /** Finishes this delivery and claims the next ready task in the same
   * transaction; resolves to it, or to null when none is ready. Never
   * waits for a task. */
  async finishAndPull(options = {}) {
    const built = pullOptions(callOptions('finishAndPull', options).lease, 0, null);
    const out = [null];
    try {
      const status = await this.#settle('finished', lib.tq_finish_and_pull, built, out);
      return status === OK ? new Task(this.#queue, out[0]) : null;
    } finally {
      if (built) lib.tq_pull_options_free(built);
    }
  }

  /**
   * Resolves to 'cancelled' as soon as this task's cancellation is recorded
   * (Queue.cancelTask, from any process), without polling: stop working on
   * it then (its next extend or finish rejects with CancelledError).
   * Resolves to 'ended' once the delivery is over (finished, failed,
   * snoozed, closed, or its lease taken back). Rejects with the signal's
   * reason when `signal` aborts, ClosedError when the queue closes. A task
   * that cannot be read for now (BusyError, IoError) is read again after a
   * short wait: the watch goes on. Every watch and wait() of a Queue share
   * one of libuv's worker threads; one watch per task at a time.
   */
  async watchCancellation(options = {}) {
    const { signal } = callOptions('watchCancellation', options);
    checkSignal(signal);
    this._ptr();
    this.#queue._handle();
    if (this.#endWatch) throw new errors.InvalidArgumentError(`task ${this.id} is already watched`);
    const look = async () => {
      if (this.#ended !== null) return 'ended';
      const status = await this._using((ptr) => this.#queue._call(lib.tq_wait_cancellation, ptr, 0, null));
      if (status === CANCELLED) return 'cancelled';
      if (status === NOT_HELD) return 'ended';
      // INTERRUPTED: a look after interrupt(), which ends the watch.
      if (status === EMPTY || status === INTERRUPTED) return undefined;
      throw asyncError(status, 'tq_wait_cancellation');
    };
    const watch = this.#queue._watch(look, {
      signal,
      retryBusy: true,
      started: (watcher) => {
        this.#endWatch = () => watcher.settle('ended');
      },
    });
    try {
      return await watch;
    } finally {
      this.#endWatch = null;
    }
  }

  /** Frees the delivery without finishing the task; idempotent. The task is
   * claimed again when its lease runs out or its holder is recovered. */
  close() {
    if (this.#ended === null) {
      this._end('closed');
    }
  }

  [Symbol.dispose]() {
    this.close();
  }

  /** Runs `fn(queue, task, ...args)`, a C call on this delivery, as a short
   * call of its Queue and resolves to its status. A delivery found not
   * held is over; one that succeeded is over when `endedAs` says how. */
  async #settle(endedAs, fn, ...args) {
    const status = await this._using((ptr) => this.#queue._call(fn, ptr, ...args));
    this.#conclude(status, endedAs, () => `${fn.info.name}: ${lib.tq_status_str(status)}`);
    return status;
  }

  /** Ends the delivery as `status` says: over when not held or cancelled
   * (throws why, with `message()`), or `endedAs` (null: still held) on
   * success; throws the error of another failure. */
  #conclude(status, endedAs, message) {
    if (status === NOT_HELD || status === CANCELLED) {
      const error = errors.fromStatus(status, `task ${this.id}: ${message()}`);
      this._end(status === CANCELLED ? 'cancelled' : 'lost');
      throw error;
    }
    if (status < 0) throw errors.fromStatus(status, message());
    if (endedAs !== null) {
      this._end(endedAs);
    }
  }

  /** Runs `call(ptr)`, an asynchronous C call given the library's task,
   * keeping the task until it settles; resolves to what it resolves to. */
  async _using(call) {
    const ptr = this._ptr();
    this.#callsUsingTask++;
    try {
      return await call(ptr);
    } finally {
      if (--this.#callsUsingTask === 0 && this.#ended !== null) this.#free();
    }
  }

  /** The library's task, or the error saying why the delivery ended. */
  _ptr() {
    if (this.#ended !== null) {
      throw this.#ended;
    }
    return this.#ptr;
  }

  /** null while held, else the error a further call would throw. */
  _ended() {
    return this.#ended;
  }

  /** Ends the delivery (`how`: finished, failed, snoozed, lost, cancelled,
   * closed), once: the first end counts. The library's task is freed now,
   * or once the C calls using it have returned. */
  _end(how) {
    if (this.#ended !== null) return;
    if (how === 'closed') {
      this.#ended = new errors.ClosedError(`task ${this.id} is closed`);
    } else if (how === 'cancelled') {
      this.#ended = new errors.CancelledError(`task ${this.id} was cancelled`);
    } else if (how === 'lost') {
      this.#ended = new errors.NotHeldError(`task ${this.id} is no longer held: finished, recovered or taken by another worker`);
    } else {
      this.#ended = new errors.NotHeldError(`task ${this.id} was already ${how}`);
    }
    unfreedTasks.unregister(this);
    if (this.#callsUsingTask === 0) this.#free();
    this.#endWatch?.();
  }

  #free() {
    if (this.#ptr !== null) {
      lib.tq_task_free(this.#ptr);
      this.#ptr = null;
    }
  }
}

/** A task as Queue.list, Queue.task or Queue.wait read it: read-only, not
 * held, with its result and progress. */
class TaskSnapshot extends TaskFields {
  #rawResult;
  #rawProgress;

  constructor(fields, rawResult = null, rawProgress = null) {
    super(fields);
    this.#rawResult = rawResult;
    this.#rawProgress = rawProgress;
  }

  /** The JSON text the task was finished with, exactly as given, or null. */
  get rawResult() {
    return this.#rawResult;
  }
  /** The result parsed from JSON, or undefined when it has none. */
  get result() {
    return this.#rawResult === null ? undefined : JSON.parse(this.#rawResult);
  }
  /** The JSON text its holder last recorded with extend(), or null. */
  get rawProgress() {
    return this.#rawProgress;
  }
  /** The progress parsed from JSON, or undefined when none was recorded. */
  get progress() {
    return this.#rawProgress === null ? undefined : JSON.parse(this.#rawProgress);
  }
}

/** The error of a wait for task `id` of queue `name`, which it does not
 * hold. */
function noTaskToWaitFor(name, id) {
  return new errors.InvalidArgumentError(
    `tq_wait_task: queue ${JSON.stringify(name)} has no task ${id} to wait for: it was never pushed, ` +
      'or it ended and was not kept (finish it with a result, or keep history)',
  );
}

/** A snapshot of the task at `ptr` (from tq_get_task or tq_wait_task),
 * which it frees. */
function adoptSnapshot(ptr) {
  try {
    return snapshotOf(ptr);
  } finally {
    lib.tq_task_free(ptr);
  }
}

/** A snapshot of the task at `ptr`, which stays the caller's. */
function snapshotOf(ptr) {
  return new TaskSnapshot(readFields(ptr, false), lib.tq_task_result(ptr), lib.tq_task_progress(ptr));
}

module.exports = { CONSTANTS, CatchUp, Durability, ParentFailure, Queue, State, Task, TaskSnapshot, open, openSync };
