'use strict';
// Loads libtq through koffi and declares the functions of include/tq.h.
//
// Every function the header declares is listed in PROTOTYPES, written as in
// the header; nothing else in the package declares C functions. The opaque
// C types are distinct koffi types, so a tq_task pointer can never be passed
// where a tq_queue pointer is expected. test/declarations.test.js checks
// each declaration against include/tq.h.

const fs = require('node:fs');
const path = require('node:path');
const koffi = requireKoffi();

/** koffi, or an error saying how to install it: `npm install <folder>`
 * links the folder without installing its dependencies. */
function requireKoffi() {
  try {
    return require('koffi');
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || !error.message.startsWith("Cannot find module 'koffi'")) throw error;
    const dir = path.join(__dirname, '..');
    throw new Error(
      `tq: koffi, which tq loads libtq with, is not installed where ${dir} can find it. ` +
        '`npm install <folder>` links a folder without installing its dependencies: ' +
        'install tq with `npm install --install-links <folder>` (or from a tarball), or run `npm ci` in the folder.',
    );
  }
}

/** The environment variable naming the library to load. */
const LIBRARY_ENV = 'TQ_LIBRARY';
/** This process's platform as the package names the folders of its copies
 * of libtq: a library built for one platform cannot load on another. */
const PLATFORM = `${process.platform}-${process.arch}`;
/** Where a packed package keeps its copies of the library, one folder per platform. */
const BUNDLED_DIR = path.join(__dirname, '..', 'native');
/** The copy for this platform, when the package carries one. */
const BUNDLED_LIBRARY = path.join(BUNDLED_DIR, PLATFORM, 'libtq.so');
/** The name the dynamic loader looks for on the system search path: the
 * shared library's SONAME, which carries the ABI version. */
const SONAME = 'libtq.so.0.3';
/** The ABI this package is written for: libtq's major and minor version
 * (before 1.0 a minor release may change the ABI, so both must match). */
const ABI_VERSION = [0, 3];

for (const name of [
  'tq_queue',
  'tq_task',
  'tq_options',
  'tq_push_options',
  'tq_pull_options',
  'tq_cancel',
  'tq_schedule_options',
  'tq_schedule',
]) {
  koffi.opaque(name);
}
// enum tq_status is returned as a C int.
koffi.alias('tq_status', 'int');

// The header's declarations, with three kinds of change koffi needs: `struct`
// and `enum` dropped before type names; `_Out_` on the parameters the
// library writes a single value to (koffi then copies it back into a
// one-element array); and the payload of tq_push as `const uint8_t *`, so
// that it takes the Buffer of UTF-8 bytes whose length is passed beside it,
// as are the JSON texts of tq_finish_with_result and tq_extend_with_progress
// (Buffers that end with a NUL byte), so that their bytes reach the library
// as given.
// Arrays are passed as JavaScript arrays (the payloads of tq_push_batch, as
// Buffers) or typed arrays (tasks as 64-bit addresses).
const PROTOTYPES = [
  'const char *tq_last_error(void)',
  'const char *tq_status_str(int32_t status)',
  'const char *tq_version(void)',
  'uint32_t tq_version_number(void)',
  'tq_status tq_location_redacted(const char *location, _Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)',
  'tq_options *tq_options_new(void)',
  'void tq_options_free(tq_options *options)',
  'tq_status tq_options_set_durability(tq_options *options, int32_t durability)',
  'tq_status tq_options_set_busy_timeout_ms(tq_options *options, uint64_t timeout_ms)',
  'tq_status tq_options_set_keep_history(tq_options *options, bool keep)',
  'tq_status tq_options_set_result_retention_ms(tq_options *options, uint64_t retention_ms)',
  'tq_status tq_options_set_max_payload_len(tq_options *options, size_t limit)',
  'tq_status tq_options_set_pool_size(tq_options *options, uint32_t size)',
  'tq_status tq_options_set_postgres_schema(tq_options *options, const char *name)',
  'tq_push_options *tq_push_options_new(void)',
  'void tq_push_options_free(tq_push_options *options)',
  'tq_status tq_push_options_set_delay_ms(tq_push_options *options, uint64_t delay_ms)',
  'tq_status tq_push_options_set_wait_for_room_ms(tq_push_options *options, uint64_t wait_ms)',
  'tq_status tq_push_options_set_run_at_unix_ms(tq_push_options *options, int64_t unix_ms)',
  'tq_status tq_push_options_set_expire_after_ms(tq_push_options *options, uint64_t after_ms)',
  'tq_status tq_push_options_set_expire_at_unix_ms(tq_push_options *options, int64_t unix_ms)',
  'tq_status tq_push_options_set_deadline_after_ms(tq_push_options *options, uint64_t after_ms)',
  'tq_status tq_push_options_set_deadline_unix_ms(tq_push_options *options, int64_t unix_ms)',
  'tq_pull_options *tq_pull_options_new(void)',
  'void tq_pull_options_free(tq_pull_options *options)',
  'tq_status tq_pull_options_set_lease_ms(tq_pull_options *options, uint64_t lease_ms)',
  'tq_status tq_options_set_queue(tq_options *options, const char *name)',
  'tq_status tq_options_set_max_attempts(tq_options *options, uint32_t max_attempts)',
  'tq_status tq_options_set_retry_backoff_ms(tq_options *options, uint64_t min_ms, uint64_t max_ms)',
  'tq_status tq_push_options_set_priority(tq_push_options *options, int32_t priority)',
  'tq_status tq_push_options_set_max_attempts(tq_push_options *options, uint32_t max_attempts)',
  'tq_status tq_push_options_set_unique_key(tq_push_options *options, const char *key)',
  'tq_status tq_push_options_set_unique_for_ms(tq_push_options *options, uint64_t window_ms)',
  'tq_status tq_push_options_set_replace_pending(tq_push_options *options, bool replace)',
  'tq_status tq_push_options_set_debounce_ms(tq_push_options *options, uint64_t max_ms)',
  'tq_status tq_push_options_add_after(tq_push_options *options, int64_t id)',
  'tq_status tq_push_options_add_after_item(tq_push_options *options, size_t index)',
  'tq_status tq_push_options_set_on_parent_failure(tq_push_options *options, int32_t policy)',
  'tq_status tq_push_options_set_group(tq_push_options *options, const char *key, uint32_t max_at_once)',
  'tq_status tq_push_options_set_fair_key(tq_push_options *options, const char *key)',
  'tq_status tq_pull_options_set_wait_ms(tq_pull_options *options, uint64_t wait_ms)',
  'tq_status tq_pull_options_set_cancel(tq_pull_options *options, const tq_cancel *cancel)',
  'tq_cancel *tq_cancel_new(void)',
  'tq_status tq_cancel_trigger(tq_cancel *cancel)',
  'void tq_cancel_free(tq_cancel *cancel)',
  'tq_status tq_open(const char *path, const tq_options *options, _Out_ tq_queue **out)',
  'void tq_close(tq_queue *queue)',
  'tq_status tq_push(tq_queue *queue, const uint8_t *payload, size_t len, const tq_push_options *options, _Out_ int64_t *out_id)',
  'tq_status tq_pull(tq_queue *queue, const tq_pull_options *options, _Out_ tq_task **out)',
  'tq_status tq_pull_batch(tq_queue *queue, const tq_pull_options *options, size_t max, tq_task **out_tasks, _Out_ size_t *out_count)',
  'tq_status tq_push_batch(tq_queue *queue, const char *const *payloads, const size_t *lens, size_t count, const tq_push_options *options, int64_t *out_ids)',
  'tq_status tq_push_items(tq_queue *queue, const char *const *payloads, const size_t *lens, const tq_push_options *const *options, size_t count, int64_t *out_ids)',
  'int64_t tq_task_id(const tq_task *task)',
  'int64_t tq_task_token(const tq_task *task)',
  'const char *tq_task_payload(const tq_task *task, size_t *len)',
  'uint32_t tq_task_attempts(const tq_task *task)',
  'int32_t tq_task_priority(const tq_task *task)',
  'uint32_t tq_task_max_attempts(const tq_task *task)',
  'int64_t tq_task_run_at_unix_ms(const tq_task *task)',
  'int64_t tq_task_expires_at_unix_ms(const tq_task *task)',
  'int64_t tq_task_deadline_unix_ms(const tq_task *task)',
  'int32_t tq_task_state(const tq_task *task)',
  'const char *tq_task_last_error(const tq_task *task)',
  'const char *tq_task_result(const tq_task *task)',
  'const char *tq_task_progress(const tq_task *task)',
  'const int64_t *tq_task_parents(const tq_task *task, _Out_ size_t *out_count)',
  'const int64_t *tq_task_waiting_for(const tq_task *task, _Out_ size_t *out_count)',
  'const char *tq_task_group(const tq_task *task)',
  'size_t tq_task_step_count(const tq_task *task)',
  'const char *tq_task_step_name(const tq_task *task, size_t index)',
  'const char *tq_task_step_output(const tq_task *task, size_t index)',
  'int64_t tq_task_step_recorded_at_unix_ms(const tq_task *task, size_t index)',
  'size_t tq_task_attempt_count(const tq_task *task)',
  'uint32_t tq_task_attempt_number(const tq_task *task, size_t index)',
  'int32_t tq_task_attempt_outcome(const tq_task *task, size_t index)',
  'const char *tq_task_attempt_reason(const tq_task *task, size_t index)',
  'int64_t tq_task_attempt_holder_id(const tq_task *task, size_t index)',
  'int64_t tq_task_attempt_holder_pid(const tq_task *task, size_t index)',
  'int64_t tq_task_attempt_started_at_unix_ms(const tq_task *task, size_t index)',
  'int64_t tq_task_attempt_ended_at_unix_ms(const tq_task *task, size_t index)',
  'tq_status tq_step_put(tq_queue *queue, const tq_task *task, const char *name, const uint8_t *json)',
  // The output as an address, which tq_string_free needs back.
  'tq_status tq_step_get(const tq_queue *queue, const tq_task *task, const char *name, _Out_ void **out_json)',
  'void tq_string_free(void *text)',
  'tq_status tq_clear_steps_after(tq_queue *queue, int64_t id, const char *name, _Out_ uint64_t *out_cleared)',
  'void tq_task_free(tq_task *task)',
  'tq_status tq_finish(tq_queue *queue, const tq_task *task)',
  'tq_status tq_finish_with_result(tq_queue *queue, const tq_task *task, const uint8_t *result)',
  'tq_status tq_get_task(const tq_queue *queue, int64_t id, _Out_ tq_task **out)',
  'tq_status tq_wait_task(const tq_queue *queue, int64_t id, uint64_t timeout_ms, const tq_cancel *cancel, _Out_ tq_task **out)',
  'tq_status tq_recover(tq_queue *queue, _Out_ int64_t *out_recovered)',
  'tq_status tq_count(const tq_queue *queue, int32_t state, _Out_ int64_t *out_count)',
  'tq_status tq_finish_and_pull(tq_queue *queue, const tq_task *task, const tq_pull_options *options, _Out_ tq_task **out)',
  'tq_status tq_finish_batch(tq_queue *queue, tq_task *const *tasks, size_t count, int32_t *out_statuses)',
  'tq_status tq_finish_and_pull_batch(tq_queue *queue, tq_task *const *tasks, size_t count, int32_t *out_statuses, const tq_pull_options *options, size_t max, tq_task **out_tasks, _Out_ size_t *out_count)',
  'tq_status tq_fail(tq_queue *queue, const tq_task *task, const char *reason)',
  'tq_status tq_extend(tq_queue *queue, const tq_task *task, uint64_t lease_ms)',
  'tq_status tq_extend_with_progress(tq_queue *queue, const tq_task *task, uint64_t lease_ms, const uint8_t *progress)',
  'tq_status tq_retry_dead(tq_queue *queue, int64_t id)',
  'tq_status tq_retry_all_dead(tq_queue *queue, _Out_ int64_t *out_retried)',
  'tq_status tq_purge(tq_queue *queue, int32_t state, uint64_t older_than_ms, _Out_ int64_t *out_purged)',
  'tq_status tq_oldest_ready_age_ms(const tq_queue *queue, _Out_ int64_t *out_age_ms)',
  'tq_status tq_groups_waiting(const tq_queue *queue, _Out_ int64_t *out_count)',
  'tq_status tq_list(const tq_queue *queue, int32_t state, int64_t after_id, size_t max, tq_task **out_tasks, _Out_ size_t *out_count)',
  'tq_status tq_checkpoint(tq_queue *queue, _Out_ int64_t *out_wal_bytes)',
  'tq_status tq_wal_size(const tq_queue *queue, _Out_ int64_t *out_wal_bytes)',
  'tq_status tq_interrupt(tq_queue *queue)',
  'tq_status tq_snooze(tq_queue *queue, const tq_task *task, uint64_t delay_ms)',
  'tq_status tq_signal(tq_queue *queue, const char *key, const uint8_t *json, uint64_t retention_ms, _Out_ int64_t *out_task_id)',
  // The payload as an address, which tq_string_free needs back.
  'tq_status tq_wait_for_event(tq_queue *queue, const tq_task *task, const char *key, uint64_t timeout_ms, _Out_ void **out_json)',
  'tq_status tq_sleep(tq_queue *queue, const tq_task *task, const char *name, uint64_t duration_ms)',
  'tq_status tq_sleep_until(tq_queue *queue, const tq_task *task, const char *name, int64_t unix_ms)',
  'tq_status tq_cancel_task(tq_queue *queue, int64_t id, const char *reason, _Out_ int32_t *out_state)',
  'tq_status tq_wait_cancellation(const tq_queue *queue, const tq_task *task, uint64_t timeout_ms, const tq_cancel *cancel)',
  'tq_status tq_wait_change(const tq_queue *queue, uint64_t seen, uint64_t timeout_ms, const tq_cancel *cancel, _Out_ uint64_t *out_mark)',
  'tq_status tq_pause(tq_queue *queue, int64_t until_unix_ms)',
  'tq_status tq_resume(tq_queue *queue)',
  'tq_status tq_paused_until(const tq_queue *queue, _Out_ int64_t *out_until_unix_ms)',
  'tq_status tq_set_concurrency_limit(tq_queue *queue, uint32_t limit)',
  'tq_status tq_clear_concurrency_limit(tq_queue *queue)',
  'tq_status tq_concurrency_limit(const tq_queue *queue, _Out_ uint32_t *out_limit)',
  'tq_status tq_set_max_pending(tq_queue *queue, uint64_t cap)',
  'tq_status tq_max_pending(const tq_queue *queue, _Out_ uint64_t *out_cap)',
  'tq_status tq_set_max_pending_per_key(tq_queue *queue, uint64_t cap)',
  'tq_status tq_max_pending_per_key(const tq_queue *queue, _Out_ uint64_t *out_cap)',
  'tq_status tq_set_key_max_pending(tq_queue *queue, const char *key, uint64_t cap)',
  'tq_status tq_key_max_pending(const tq_queue *queue, const char *key, _Out_ uint64_t *out_cap)',
  'tq_status tq_set_fair_weight(tq_queue *queue, const char *key, double weight)',
  'tq_status tq_fair_weight(const tq_queue *queue, const char *key, _Out_ double *out_weight)',
  'tq_status tq_set_rate_limit(tq_queue *queue, uint32_t claims, uint64_t per_ms)',
  'tq_status tq_clear_rate_limit(tq_queue *queue)',
  'tq_status tq_rate_limit(const tq_queue *queue, _Out_ uint32_t *out_claims, _Out_ uint64_t *out_per_ms)',
  'tq_schedule_options *tq_schedule_options_new(void)',
  'void tq_schedule_options_free(tq_schedule_options *options)',
  'tq_status tq_schedule_options_set_cron(tq_schedule_options *options, const char *expression)',
  'tq_status tq_schedule_options_set_every_ms(tq_schedule_options *options, uint64_t interval_ms)',
  'tq_status tq_schedule_options_set_time_zone(tq_schedule_options *options, const char *name)',
  'tq_status tq_schedule_options_set_priority(tq_schedule_options *options, int32_t priority)',
  'tq_status tq_schedule_options_set_max_attempts(tq_schedule_options *options, uint32_t max_attempts)',
  'tq_status tq_schedule_options_set_catch_up(tq_schedule_options *options, int32_t policy, uint32_t limit)',
  'tq_status tq_schedule_add(tq_queue *queue, const char *name, const char *payload, size_t len, const tq_schedule_options *options)',
  'tq_status tq_schedule_replace(tq_queue *queue, const char *name, const char *payload, size_t len, const tq_schedule_options *options)',
  'tq_status tq_schedule_upsert(tq_queue *queue, const char *name, const char *payload, size_t len, const tq_schedule_options *options)',
  'tq_status tq_schedule_remove(tq_queue *queue, const char *name)',
  'tq_status tq_schedule_pause(tq_queue *queue, const char *name)',
  'tq_status tq_schedule_resume(tq_queue *queue, const char *name)',
  'tq_status tq_run_due_schedules(tq_queue *queue, _Out_ int64_t *out_enqueued)',
  'tq_status tq_schedules(const tq_queue *queue, const char *after_name, size_t max, tq_schedule **out_schedules, _Out_ size_t *out_count)',
  'void tq_schedule_free(tq_schedule *schedule)',
  'const char *tq_schedule_name(const tq_schedule *schedule)',
  'const char *tq_schedule_cron(const tq_schedule *schedule)',
  'uint64_t tq_schedule_every_ms(const tq_schedule *schedule)',
  'const char *tq_schedule_time_zone(const tq_schedule *schedule)',
  'const char *tq_schedule_payload(const tq_schedule *schedule, size_t *len)',
  'int32_t tq_schedule_priority(const tq_schedule *schedule)',
  'uint32_t tq_schedule_max_attempts(const tq_schedule *schedule)',
  'int32_t tq_schedule_catch_up(const tq_schedule *schedule, _Out_ uint32_t *out_limit)',
  'bool tq_schedule_paused(const tq_schedule *schedule)',
  'int64_t tq_schedule_next_slot_unix_ms(const tq_schedule *schedule)',
];

/** The header's limits and defaults (#define constants, which a shared
 * library does not export), checked against include/tq.h by the tests. */
const CONSTANTS = Object.freeze({
  MAX_PAYLOAD_LEN: 1_000_000_000,
  MAX_QUEUE_NAME_LEN: 128,
  MAX_UNIQUE_KEY_LEN: 1024,
  MAX_REASON_LEN: 64 * 1024,
  DEFAULT_MAX_ATTEMPTS: 25,
  DEFAULT_POOL_SIZE: 4,
  MAX_POOL_SIZE: 1024,
  MAX_PARENTS: 10_000,
  MAX_GROUP_AT_ONCE: 1000,
  MAX_SCHEDULE_NAME_LEN: 200,
  MAX_STEP_NAME_LEN: 1024,
  ATTEMPTS_KEPT: 20,
  MAX_EVENT_KEY_LEN: 1000,
  MAX_SLEEP_NAME_LEN: 1000,
  MAX_CATCH_UP: 10_000,
  MAX_RATE_CLAIMS: 100_000,
  MIN_FAIR_WEIGHT: 0.001,
  MAX_FAIR_WEIGHT: 1_000_000,
  /** The end of a pause that lasts until resumed (INT64_MAX), as a BigInt;
   * Queue.pause and Queue.pausedUntil speak of it as Infinity. */
  UNTIL_RESUMED: 2n ** 63n - 1n,
});

/** Returns { library, where }, trying the three places in order. */
function openLibrary() {
  const places = [
    `the ${LIBRARY_ENV} environment variable`,
    `the copy inside the package (${BUNDLED_LIBRARY})`,
    `the system's library search path (${SONAME})`,
  ];
  const named = process.env[LIBRARY_ENV];
  if (named) {
    // A library named explicitly is never silently replaced by another.
    try {
      return { library: koffi.load(named), where: named };
    } catch (error) {
      throw new Error(
        `tq: cannot load libtq from ${LIBRARY_ENV}=${JSON.stringify(named)}: ${error.message}. ` +
          `Unset ${LIBRARY_ENV} to use ${places[1]} or ${places[2]}.`,
      );
    }
  }
  const reasons = [`${places[0]}: not set`];
  const carried = bundledPlatforms();
  if (carried.includes(PLATFORM)) {
    try {
      return { library: koffi.load(BUNDLED_LIBRARY), where: BUNDLED_LIBRARY };
    } catch (error) {
      reasons.push(`${places[1]}: ${error.message}`);
    }
  } else if (carried.length > 0) {
    reasons.push(`${places[1]}: the package carries libtq for ${carried.join(', ')} only, and this is ${PLATFORM}`);
  } else {
    reasons.push(`${places[1]}: not present`);
  }
  try {
    return { library: koffi.load(SONAME), where: SONAME };
  } catch (error) {
    reasons.push(`${places[2]}: ${error.message}`);
  }
  throw new Error(
    `tq: libtq was not found for ${PLATFORM}. Looked in ${reasons.join('; ')}. ` +
      `Build it for ${PLATFORM} with \`make lib\` in tq's repository and set ${LIBRARY_ENV} to the library in build/lib, ` +
      'install a package that carries it, or install libtq with `make install`.',
  );
}

/** The platforms the package carries a copy of libtq for (none in the source tree). */
function bundledPlatforms() {
  try {
    return fs.readdirSync(BUNDLED_DIR).filter((name) => fs.existsSync(path.join(BUNDLED_DIR, name, 'libtq.so')));
  } catch (error) {
    if (error.code === 'ENOENT') return [];
    throw error;
  }
}

/** Declares every function of PROTOTYPES; returns them by C name. */
function declare(library, where) {
  const functions = {};
  for (const prototype of PROTOTYPES) {
    const name = /(tq_\w+)\(/.exec(prototype)[1];
    try {
      functions[name] = library.func(prototype);
    } catch (error) {
      const [major, minor] = ABI_VERSION;
      throw new Error(`tq: ${where} cannot give ${name} (${error.message}); it is not libtq ${major}.${minor}`);
    }
  }
  return functions;
}

/** Refuses a library of another ABI version than ABI_VERSION. */
function checkVersion(functions, where) {
  const number = functions.tq_version_number();
  const found = [Math.floor(number / 10000), Math.floor(number / 100) % 100];
  if (found[0] !== ABI_VERSION[0] || found[1] !== ABI_VERSION[1]) {
    throw new Error(
      `tq: the libtq loaded from ${where} is version ${functions.tq_version()}, ` +
        `but this package is written for the ABI of libtq ${ABI_VERSION.join('.')}`,
    );
  }
}

const { library, where } = openLibrary();
const lib = declare(library, where);
checkVersion(lib, where);

module.exports = {
  ABI_VERSION,
  BUNDLED_LIBRARY,
  CONSTANTS,
  LIBRARY_ENV,
  LIBRARY_PATH: where,
  PLATFORM,
  PROTOTYPES,
  SONAME,
  checkVersion,
  koffi,
  lib,
};
