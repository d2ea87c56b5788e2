'use strict';
// Looking after a queue: counting and listing its tasks, retrying dead
// tasks, purging, the write-ahead log, cancelling, pausing and limiting
// claims. The methods of Queue that answer these, which queue.js puts on
// Queue.prototype.

const { CONSTANTS, lib, koffi } = require('./native');
const errors = require('./errors');
const { EMPTY, UINT32_MAX } = require('./limits');
const { cString, enumValue, integer, jsonText, milliseconds, reasonText } = require('./options');
const { STATE_NAMES, State, snapshotOf, stepName } = require('./task');

const UNTIL_RESUMED = CONSTANTS.UNTIL_RESUMED;

/** The methods of Queue that look after it; queue.js puts them on Queue.prototype. */
class QueueAdmin {
  // --- Upkeep and visibility -------------------------------------------------

  /** Takes back the tasks of expired leases and dead holders; resolves to
   * how many. */
  async recover() {
    return Number(await this._read(lib.tq_recover));
  }

  /** How many tasks of this queue are in `state` (a State value or its name). */
  async count(state = State.PENDING) {
    return Number(await this._read(lib.tq_count, enumValue('state', State, state)));
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
    return Number(await this._read(lib.tq_groups_waiting));
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

  /** Deletes the steps of task `id` recorded after its step `name`, so
   * that its next delivery runs them again ("retry from step `name`");
   * resolves to how many. retryDead keeps every step: clear first. Rejects
   * with InvalidArgumentError, changing nothing, for a task not in the
   * queue, one a worker holds, or one without a step `name`. */
  async clearStepsAfter(id, name) {
    const taskId = integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    return Number(await this._read(lib.tq_clear_steps_after, taskId, stepName(name)));
  }

  /** Sends an event under `key` with `payload` (a Payload) in one commit
   * and resolves to the id of the task that took it: when tasks of this
   * queue wait for `key` (Task.waitFor), the one that has waited longest
   * takes it and is ready at once; the others keep waiting for the next
   * event. Otherwise the event is kept for `retention` milliseconds (0, the
   * default: 7 days), behind any other kept under `key`, and the call
   * resolves to null: waits take them in the order they were sent. */
  async signal(key, payload, { retention = 0 } = {}) {
    const woken = await this._read(
      lib.tq_signal,
      stepName(key, 'event key'),
      jsonText("event's payload", payload),
      milliseconds('retention', retention),
    );
    return Number(woken) === 0 ? null : Number(woken);
  }

  /** Makes every dead task pending again; resolves to how many. */
  async retryAllDead() {
    return Number(await this._read(lib.tq_retry_all_dead));
  }

  /** Deletes the tasks in `state` ('done', 'dead' or 'cancelled') older than
   * `olderThan` milliseconds (0: all); resolves to how many. */
  async purge({ state = State.DONE, olderThan = 0 } = {}) {
    return Number(await this._read(lib.tq_purge, enumValue('state', State, state), milliseconds('olderThan', olderThan)));
  }

  /** Checkpoints the write-ahead log; resolves to its size afterwards in bytes. */
  async checkpoint() {
    return Number(await this._read(lib.tq_checkpoint));
  }

  /** The size of the file's write-ahead log in bytes. */
  async walSize() {
    return Number(await this._read(lib.tq_wal_size));
  }

  // --- Control ---------------------------------------------------------------

  /** Cancels task `id`, keeping `reason` as its last error; resolves to
   * 'cancelled' (it left the line) or 'leased' (its holder learns of it at
   * its next call on the delivery). */
  async cancelTask(id, reason) {
    const text = reasonText(reason);
    const state = await this._read(lib.tq_cancel_task, integer('id', id, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), text);
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
    const until = BigInt(await this._read(lib.tq_paused_until));
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
    return (await this._read(lib.tq_concurrency_limit)) || null;
  }

  /** Caps this queue at `cap` pending tasks (ready, delayed, waiting for
   * other tasks or a retry; leased ones do not count), across every
   * process; null or 0 removes the cap. A push beyond it stores nothing and
   * rejects with FullError (a batch: none of it), unless its `waitForRoom`
   * lets it wait; a push finding its unique key held is never refused. */
  async setMaxPending(cap) {
    await this._checkedCall(lib.tq_set_max_pending, cap === null ? 0 : integer('cap', cap, 0, Number.MAX_SAFE_INTEGER));
  }

  /** This queue's cap on pending tasks, or null when it has none. */
  async maxPending() {
    return Number(await this._read(lib.tq_max_pending)) || null;
  }

  /** Caps each fairness key of this queue at `cap` pending tasks (counted
   * as setMaxPending counts them), unless the key has a cap of its own
   * (setKeyMaxPending); null or 0 removes this default. A push beyond its
   * key's cap rejects with FullError (a batch: none of it), unless its
   * `waitForRoom` lets it wait; other keys are not affected. Makes the
   * queue fair. SQLite only. */
  async setMaxPendingPerKey(cap) {
    await this._checkedCall(lib.tq_set_max_pending_per_key, cap === null ? 0 : integer('cap', cap, 0, Number.MAX_SAFE_INTEGER));
  }

  /** The default cap on each fairness key's pending tasks, or null. */
  async maxPendingPerKey() {
    return Number(await this._read(lib.tq_max_pending_per_key)) || null;
  }

  /** Caps fairness key `key` ('': the tasks pushed without one) at `cap`
   * pending tasks, in place of the default of setMaxPendingPerKey; null or
   * 0 removes the key's own cap, so that the default applies again.
   * SQLite only. */
  async setKeyMaxPending(key, cap) {
    await this._checkedCall(
      lib.tq_set_key_max_pending,
      cString('key', key),
      cap === null ? 0 : integer('cap', cap, 0, Number.MAX_SAFE_INTEGER),
    );
  }

  /** The cap in force for fairness key `key`: its own, else the queue's
   * default for every key; null when neither is set. */
  async keyMaxPending(key) {
    return Number(await this._read(lib.tq_key_max_pending, cString('key', key))) || null;
  }

  /** Sets the weight of fairness key `key` of this queue ('': the tasks
   * pushed without one), 0.001 to 1,000,000, default 1: among the keys with
   * ready tasks, each gets deliveries in proportion to its weight (see the
   * push option `fairKey`). SQLite only. */
  async setFairWeight(key, weight) {
    if (typeof weight !== 'number') {
      throw new TypeError(`weight must be a number, not ${typeof weight}`);
    }
    await this._checkedCall(lib.tq_set_fair_weight, cString('key', key), weight);
  }

  /** The weight of fairness key `key` of this queue: 1 unless one was set. */
  async fairWeight(key) {
    return this._read(lib.tq_fair_weight, cString('key', key));
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
}

module.exports = { QueueAdmin };
