'use strict';
// Schedules: CatchUp, a schedule as listed, and the methods of Queue that
// add, replace, upsert, list, remove, pause, resume and run them, which
// queue.js puts on Queue.prototype.

const { lib, koffi } = require('./native');
const errors = require('./errors');
const { INT32_MAX, INT32_MIN, UINT32_MAX } = require('./limits');
const {
  buildOptions,
  cString,
  callOptions,
  encode,
  enumValue,
  integer,
  milliseconds,
  payloadPointer,
} = require('./options');

/** Values for a schedule's `catchUp`: what the slots that came due while
 * nothing drove the schedule become when something next does. */
const CatchUp = Object.freeze({ SKIP: 0, ONE: 1, EACH: 2 });
const CATCH_UP_NAMES = ['skip', 'one', 'each'];

/** The methods of Queue for its schedules; queue.js puts them on Queue.prototype. */
class QueueSchedules {
  // --- Schedules -------------------------------------------------------------

  /** Adds to this queue the schedule `name`, which enqueues a task of
   * `payload` (taken as push takes it) at every slot of `options.cron` or
   * `options.every`, the first one after now. */
  async addSchedule(name, payload, options) {
    await this._putSchedule('addSchedule', lib.tq_schedule_add, name, payload, options);
  }

  /** As addSchedule, overwriting a schedule of the same name: its next slot
   * is computed afresh and it is no longer paused. */
  async replaceSchedule(name, payload, options) {
    await this._putSchedule('replaceSchedule', lib.tq_schedule_replace, name, payload, options);
  }

  /** Declares a schedule, as an application does at every start: as
   * addSchedule, or an update of the schedule of the same name that keeps
   * its next slot while its timing (cron or every, time zone, catch-up) is
   * unchanged, so that a restart neither delays an interval's slot nor
   * skips a due slot. A changed timing's next slot is computed afresh; a
   * paused schedule stays paused. */
  async upsertSchedule(name, payload, options) {
    await this._putSchedule('upsertSchedule', lib.tq_schedule_upsert, name, payload, options);
  }

  async _putSchedule(call, put, name, payload, options) {
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
    return Number(await this._read(lib.tq_run_due_schedules));
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

module.exports = { CatchUp, QueueSchedules };
