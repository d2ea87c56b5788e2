'use strict';
// Task, one delivery of a task, and TaskSnapshot, a task as read: their
// fields, copied out of the library, and what a holder does with a
// delivery (finish, fail, extend, snooze, finish and pull, watch).

const { lib, koffi } = require('./native');
const errors = require('./errors');
const { CANCELLED, DUPLICATE, EMPTY, INTERRUPTED, NOT_HELD, OK, SUSPENDED, TIMEOUT, asyncError, checkAsync } = require('./limits');
const { callOptions, checkSignal, jsonText, milliseconds, pullOptions, reasonText, unixMs } = require('./options');

/** Values for count, list and purge: a task's states. */
const State = Object.freeze({ PENDING: 0, LEASED: 1, DONE: 2, DEAD: 3, CANCELLED: 4 });
const STATE_NAMES = ['pending', 'leased', 'done', 'dead', 'cancelled'];

/** Frees a task that its Task object never ended or closed. */
const unfreedTasks = new FinalizationRegistry((ptr) => lib.tq_task_free(ptr));

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
    expiresAtMs: pulled ? 0 : lib.tq_task_expires_at_unix_ms(ptr),
    deadlineMs: pulled ? 0 : lib.tq_task_deadline_unix_ms(ptr),
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
  /** For a snapshot, when its first delivery may no longer start
   * (`expireAfter`), or null when it has none. Null for a pulled task. */
  get expiresAt() {
    return this.#fields.expiresAtMs ? new Date(this.#fields.expiresAtMs) : null;
  }
  /** For a snapshot, when no delivery may start any more
   * (`deadlineAfter`), or null when it has none. Null for a pulled task. */
  get deadline() {
    return this.#fields.deadlineMs ? new Date(this.#fields.deadlineMs) : null;
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
  #token;
  /** null while the delivery is held, else how it ended (see _end). */
  #ended = null;
  /** The error a further call throws, made when first asked for: most
   * deliveries end finished and are never used again. */
  #endedError = null;
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
    // A random 64-bit number: a BigInt, since a Number would round it.
    this.#token = BigInt(lib.tq_task_token(ptr));
    unfreedTasks.register(this, ptr, this);
  }

  /** The token of this delivery (a BigInt): with `id`, it finishes the
   * task in SQL, `SELECT tq_finish(id, token)` through tq's SQLite
   * extension (libtq_sqlite), in the same commit as the worker's own
   * writes. */
  get token() {
    return this.#token;
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
      // Lined up with the Queue's other finishes and pulls into one call.
      const status = await this._using((ptr) => this.#queue._finish(ptr));
      this.#conclude(status, 'finished', () => `tq_finish: ${lib.tq_status_str(status)}`);
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

  /** Runs step `name` of this task once across its deliveries: resolves to
   * the output an earlier delivery recorded, without calling `fn`;
   * otherwise awaits `fn()` and records what it returns (a Payload, taken
   * as finish's result) with the task in one commit, then resolves to it,
   * parsed. A rejection of `fn` records nothing: the step runs again at
   * the next delivery. The first output recorded is kept. */
  async step(name, fn) {
    if (typeof fn !== 'function') {
      throw new TypeError(`step ${JSON.stringify(name)} needs a function to run`);
    }
    const encodedName = stepName(name);
    const recorded = await this.#stepOutput(encodedName);
    if (recorded !== null) {
      return JSON.parse(recorded);
    }
    const text = jsonText("step's output", await fn());
    const status = await this.#settle(null, lib.tq_step_put, encodedName, text);
    if (status === DUPLICATE) {
      // Recorded meanwhile by another call: the first output stands.
      return JSON.parse(await this.#stepOutput(encodedName));
    }
    return JSON.parse(text.subarray(0, -1).toString('utf8'));
  }

  /** The JSON text recorded for a step, or null. */
  async #stepOutput(encodedName) {
    const out = [null];
    const status = checkAsync(
      await this._using((ptr) => this.#queue._call(lib.tq_step_get, ptr, encodedName, out)),
      'tq_step_get',
    );
    if (status === EMPTY) {
      return null;
    }
    try {
      return koffi.decode(out[0], 'char', -1);
    } finally {
      lib.tq_string_free(out[0]);
    }
  }

  /** Waits up to `timeout` milliseconds for an event under `key`
   * (Queue.signal) and resolves to its payload, parsed. An event kept
   * under `key` is taken at once and the task stays held. Otherwise the
   * task is handed back to wait, spending no attempt and keeping its
   * steps, and the call rejects with SuspendedError: let it leave the
   * handler. The next delivery runs the handler again, and the same call
   * resolves to the event's payload or rejects with EventTimeoutError;
   * every later call for `key` gives the same answer:
   * `const paid = await task.waitFor('payment:42', { timeout: 3_600_000 })`.
   * A timeout of 0 never suspends. */
  async waitFor(key, { timeout } = {}) {
    const encodedKey = stepName(key, 'event key');
    const out = [null];
    const status = await this.#settle(null, lib.tq_wait_for_event, encodedKey, milliseconds('timeout', timeout), out);
    if (status === TIMEOUT) {
      throw new errors.EventTimeoutError(`the wait of task ${this.id} for an event under ${JSON.stringify(key)} timed out`);
    }
    if (status === SUSPENDED) this.#suspended();
    try {
      return JSON.parse(koffi.decode(out[0], 'char', -1));
    } finally {
      lib.tq_string_free(out[0]);
    }
  }

  /** Sleeps the task for `duration` milliseconds from the first call of
   * the sleep named `name`, as sleepUntil does. */
  async sleep(name, duration) {
    const status = await this.#settle(null, lib.tq_sleep, stepName(name, 'sleep name'), milliseconds('duration', duration));
    if (status === SUSPENDED) this.#suspended();
  }

  /** Sleeps the task until `when` (a Date, or ms since the Unix epoch),
   * durably: the sleep named `name` records its end among the task's
   * steps at its first call, and every later call reads it. Before the
   * end, the task is handed back until then (no attempt spent, steps
   * kept) and the call rejects with SuspendedError; once the end has
   * passed, it resolves at once. */
  async sleepUntil(name, when) {
    const status = await this.#settle(null, lib.tq_sleep_until, stepName(name, 'sleep name'), unixMs('when', when));
    if (status === SUSPENDED) this.#suspended();
  }

  /** Ends this delivery as handed back to wait, throwing SuspendedError. */
  #suspended() {
    this._end('suspended');
    throw new errors.SuspendedError(`task ${this.id} was handed back to wait`);
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
      throw this._ended();
    }
    return this.#ptr;
  }

  /** null while held, else the error a further call would throw. */
  _ended() {
    if (this.#ended !== null && this.#endedError === null) {
      this.#endedError = endedError(this.id, this.#ended);
    }
    return this.#endedError;
  }

  /** Ends the delivery (`how`: finished, failed, snoozed, lost, cancelled,
   * closed), once: the first end counts. The library's task is freed now,
   * or once the C calls using it have returned. */
  _end(how) {
    if (this.#ended !== null) return;
    this.#ended = how;
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

/** The error a call on task `id` throws once its delivery ended `how`. */
function endedError(id, how) {
  if (how === 'closed') return new errors.ClosedError(`task ${id} is closed`);
  if (how === 'cancelled') return new errors.CancelledError(`task ${id} was cancelled`);
  if (how === 'lost') return new errors.NotHeldError(`task ${id} is no longer held: finished, recovered or taken by another worker`);
  return new errors.NotHeldError(`task ${id} was already ${how}`);
}

/** A task as Queue.list, Queue.task or Queue.wait read it: read-only, not
 * held, with its result and progress. */
class TaskSnapshot extends TaskFields {
  #rawResult;
  #rawProgress;
  #steps;
  #endedAttempts;

  constructor(fields, rawResult = null, rawProgress = null, steps = NO_STEPS, endedAttempts = NO_ATTEMPTS) {
    super(fields);
    this.#rawResult = rawResult;
    this.#rawProgress = rawProgress;
    this.#steps = steps;
    this.#endedAttempts = endedAttempts;
  }

  /** Its deliveries that ended without finishing it (failed, lease taken
   * back, holder gone, cancelled while held), oldest first: the newest
   * ATTEMPTS_KEPT, as Queue.task or Queue.wait read them; none in a list. */
  get endedAttempts() {
    return this.#endedAttempts;
  }

  /** The steps its deliveries recorded (Task.step), in the order they were
   * recorded, as Queue.task or Queue.wait read them; none in a list. */
  get steps() {
    return this.#steps;
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
  return new TaskSnapshot(
    readFields(ptr, false),
    lib.tq_task_result(ptr),
    lib.tq_task_progress(ptr),
    readSteps(ptr),
    readAttempts(ptr),
  );
}

const NO_STEPS = Object.freeze([]);

/** The steps a snapshot at `ptr` lists, each with its name, output (parsed
 * and raw) and the Date it was recorded. */
function readSteps(ptr) {
  const count = Number(lib.tq_task_step_count(ptr));
  if (count === 0) {
    return NO_STEPS;
  }
  const steps = [];
  for (let index = 0; index < count; index++) {
    const rawOutput = lib.tq_task_step_output(ptr, index);
    steps.push(
      Object.freeze({
        name: lib.tq_task_step_name(ptr, index),
        output: JSON.parse(rawOutput),
        rawOutput,
        recordedAt: new Date(Number(lib.tq_task_step_recorded_at_unix_ms(ptr, index))),
      }),
    );
  }
  return Object.freeze(steps);
}

const NO_ATTEMPTS = Object.freeze([]);

/** How an attempt ended, by tq_attempt_outcome's value. */
const OUTCOMES = ['failed', 'lease expired', 'holder died', 'cancelled'];

/** The ended attempts a snapshot at `ptr` lists, oldest first; a holder or
 * start the library does not know (0) is null. */
function readAttempts(ptr) {
  const count = Number(lib.tq_task_attempt_count(ptr));
  if (count === 0) {
    return NO_ATTEMPTS;
  }
  const known = (value) => (value === 0 ? null : Number(value));
  const attempts = [];
  for (let index = 0; index < count; index++) {
    const started = known(lib.tq_task_attempt_started_at_unix_ms(ptr, index));
    attempts.push(
      Object.freeze({
        attempt: lib.tq_task_attempt_number(ptr, index),
        outcome: OUTCOMES[lib.tq_task_attempt_outcome(ptr, index)],
        reason: lib.tq_task_attempt_reason(ptr, index),
        holderId: known(lib.tq_task_attempt_holder_id(ptr, index)),
        holderPid: known(lib.tq_task_attempt_holder_pid(ptr, index)),
        startedAt: started === null ? null : new Date(started),
        endedAt: new Date(Number(lib.tq_task_attempt_ended_at_unix_ms(ptr, index))),
      }),
    );
  }
  return Object.freeze(attempts);
}

/** A step's name (or an event's key, a sleep's name: `what`) for the
 * library: a string without NUL. */
function stepName(name, what = 'step name') {
  if (typeof name !== 'string') {
    throw new TypeError(`a ${what} must be a string, not ${typeof name}`);
  }
  if (name.includes('\0')) {
    throw new errors.InvalidArgumentError(`the ${what} contains a NUL byte`);
  }
  return name;
}

module.exports = {
  NO_IDS,
  STATE_NAMES,
  State,
  Task,
  TaskSnapshot,
  adoptAll,
  adoptSnapshot,
  noTaskToWaitFor,
  readFields,
  readSteps,
  snapshotOf,
  stepName,
};
