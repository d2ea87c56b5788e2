/*
 * tq: a persistent task queue in one SQLite file.
 *
 * tq_push stores a JSON task; tq_pull atomically claims the ready task first
 * in line (by priority, then readiness) under a lease, waiting for one if
 * asked to; tq_finish completes it, tq_fail retries it later or, once its
 * attempts are used, makes it dead; tq_recover brings back the tasks of
 * crashed workers without touching those of live ones. One file holds any
 * number of named queues; a handle works on one of them.
 *
 * Errors. Every fallible call returns a tq_status: TQ_OK (0) on success, a
 * positive value for a non-error outcome (TQ_EMPTY, TQ_DUPLICATE), a
 * negative value for an error. After an error, tq_last_error() gives a
 * message for the calling thread; it is owned by tq and valid until the
 * thread's next failed call (calls that succeed, including every _free of a
 * live object, leave it alone). A failed call changes nothing, with two
 * exceptions: a write failing with TQ_ERR_IO while it commits may still
 * have reached the disk (once), and one failing with
 * TQ_ERR_UNKNOWN_OUTCOME may or may not have been committed (SQLite: the
 * flush after the commit failed; PostgreSQL: the connection was lost while
 * committing).
 *
 * Ownership. What tq allocates, tq frees: tq_open's handle with tq_close,
 * each task from tq_pull, tq_pull_batch or tq_list with tq_task_free, each
 * schedule from tq_schedules with tq_schedule_free, each options or cancel
 * object with its _free.
 * Every _free and tq_close accepts NULL and must be called at most once per
 * object. A borrowed result (tq_task_payload) lives exactly as long as its
 * parent. Strings tq returns from tq_status_str and tq_version are static.
 * tq records the objects it hands out: a pointer already freed or closed,
 * or an object of the wrong type, is refused with TQ_ERR_INVALID_ARGUMENT
 * (a second free is ignored, with a message) without being read. This is
 * best effort: once the address is reused for a new object of the same
 * type, the stale pointer reaches that object.
 *
 * Threads. One tq_queue may be used from any number of threads at once;
 * calls on it are ordered inside tq. To stop threads waiting in tq_pull,
 * call tq_interrupt, join them, then tq_close. A tq_task may be read by
 * several threads, but freed by one. An options object is read only during
 * the call it is passed to; do not set it while another thread passes it to
 * a call.
 *
 * const. A function taking a const pointer to a tq object changes neither
 * that object nor what it stores: the const tq_queue * functions only read
 * or wait. Every other function takes a plain pointer, whether or not it
 * may run concurrently (each says so): tq_push and tq_interrupt take
 * tq_queue *. An array of tasks is tq_task *const *, so tq_pull_batch's
 * array passes to tq_finish_batch as it is.
 *
 * Processes. Any number of processes on one host may open the same file
 * (it must be on a local filesystem: WAL mode needs shared memory). A handle
 * belongs to the process that opened it: in a child after fork() every call
 * on it fails with TQ_ERR_INVALID_ARGUMENT; open a new handle there. In a
 * child forked while another thread was inside a tq call, a call that needs
 * what that thread held fails within about a second with
 * TQ_ERR_INVALID_ARGUMENT (a _new function returns NULL) rather than hang:
 * fork outside tq calls. Do not open tq's file with another copy of SQLite
 * in the same process: closing that copy's descriptors would drop tq's
 * locks.
 *
 * Options. Options are opaque objects with a _new, one setter per option
 * and a _free; passing NULL instead of an options object means the
 * defaults (except for tq_schedule_add and tq_schedule_replace, whose
 * options carry the schedule's spec). Setters check their value and return
 * TQ_ERR_INVALID_ARGUMENT for one out of range.
 *
 * Schedules. A queue may hold periodic schedules (a cron expression in a
 * time zone, or an interval) that enqueue a task at each slot, exactly once
 * however many processes drive them: tq_pull drives the due ones of its
 * queue by itself, and tq_run_due_schedules does where nothing pulls.
 *
 * Durability. TQ_DURABILITY_FULL (the default): a call returns once its
 * write is flushed to disk, so it survives power loss; one flush per commit.
 * TQ_DURABILITY_NORMAL: survives a process crash, may lose the last commits
 * on power loss or OS crash; several times faster.
 *
 * PostgreSQL. A path that is a postgres:// or postgresql:// URL opens the
 * queue in that database instead (schema "tq" unless
 * tq_options_set_postgres_schema names another), shared by any number of
 * machines; tq_options_set_pool_size sizes each handle's connections.
 * Leases and due times there follow the server's clock. Durability maps
 * onto synchronous_commit (FULL: on, NORMAL: off) and the busy timeout onto
 * lock_timeout; tq_checkpoint and tq_wal_size fail with
 * TQ_ERR_INVALID_ARGUMENT. A write whose connection is lost while it
 * commits fails with TQ_ERR_UNKNOWN_OUTCOME: it may or may not have been
 * committed.
 *
 * Versions. TQ_VERSION_* describe this header; tq_version() and
 * tq_version_number() describe the library loaded at run time.
 *
 * Layout. After the constants and types, the functions come object by
 * object, each group opening with an underlined title: errors, versions,
 * queues, locations, pushing, working, steps, events, tasks, managing
 * tasks, open options, push options, pull options, cancellation,
 * schedules. Each function's comment opens with a one-line title.
 */


#ifndef TQ_H
#define TQ_H

/* Generated from the Rust sources by cbindgen: do not edit by hand.
   Regenerate with `TQ_BLESS=1 cargo test --test header`. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TQ_VERSION "0.3.0"
#define TQ_VERSION_MAJOR 0
#define TQ_VERSION_MINOR 3
#define TQ_VERSION_PATCH 0
#define TQ_VERSION_NUMBER 300

/*
 How many ended attempts a task keeps: the newest ones. A constant of
 both schemas (SQLite's migration 16, PostgreSQL's 15).
 */
#define TQ_ATTEMPTS_KEPT 20

/*
 The end of a pause that lasts until `tq_resume`, as `tq_paused_until`
 reports it and `tq_pause` takes it.
 */
#define TQ_UNTIL_RESUMED INT64_MAX

/*
 How many deliveries a task gets unless its queue or its push says
 otherwise ([`OpenOptions::max_attempts`], [`PushOptions::max_attempts`]).
 */
#define TQ_DEFAULT_MAX_ATTEMPTS 25

/*
 The largest payload any queue accepts, in bytes (SQLite's limit on one
 value); [`OpenOptions::max_payload_len`] sets a queue's own limit.
 */
#define TQ_MAX_PAYLOAD_LEN 1000000000

/*
 The longest queue name, in bytes.
 */
#define TQ_MAX_QUEUE_NAME_LEN 128

/*
 How many connections a PostgreSQL handle keeps at most unless
 [`OpenOptions::pool_size`] says otherwise.
 */
#define TQ_DEFAULT_POOL_SIZE 4

/*
 The largest connection pool a handle may have.
 */
#define TQ_MAX_POOL_SIZE 1024

/*
 The longest unique key, in bytes.
 */
#define TQ_MAX_UNIQUE_KEY_LEN 1024

/*
 The longest name of a step ([`crate::Queue::record_step`]), in bytes.
 */
#define TQ_MAX_STEP_NAME_LEN 1024

/*
 The most tasks one task may wait for.
 */
#define TQ_MAX_PARENTS 10000

/*
 The most tasks of one ordered group delivered at once
 ([`PushOptions::group`]).
 */
#define TQ_MAX_GROUP_AT_ONCE 1000

/*
 The longest failure reason kept, in bytes; a longer one is cut at a
 character boundary.
 */
#define TQ_MAX_REASON_LEN (64 * 1024)

/*
 The longest key of an event, in bytes: the names of the steps that
 record a wait's outcome (`tq:timeout:` and the key) then fit in the
 longest step name.
 */
#define TQ_MAX_EVENT_KEY_LEN 1000

/*
 The longest name of a sleep, in bytes.
 */
#define TQ_MAX_SLEEP_NAME_LEN 1000

/*
 The smallest weight of a fairness key.
 */
#define TQ_MIN_FAIR_WEIGHT 0.001

/*
 The largest weight of a fairness key.
 */
#define TQ_MAX_FAIR_WEIGHT 1000000.0

/*
 The longest schedule name, in bytes.
 */
#define TQ_MAX_SCHEDULE_NAME_LEN 200

/*
 The most slots [`CatchUp::Each`] enqueues in one go.
 */
#define TQ_MAX_CATCH_UP 10000

/*
 The most deliveries a rate limit's window may allow (each is a row in
 the file).
 */
#define TQ_MAX_RATE_CLAIMS 100000

/*
 The outcome of a call. 0 is success, positive values are non-error
 outcomes, negative values are errors (the thread's `tq_last_error()` then
 says more). Values are never renumbered; a retired one stays reserved.
 */
typedef enum tq_status {
  /*
   Success.
   */
  TQ_OK = 0,
  /*
   `tq_pull` found no ready task (or `tq_oldest_ready_age_ms` no ready
   task to measure). Not an error.
   */
  TQ_EMPTY = 1,
  /*
   `tq_push` with a unique key stored nothing: a task of the queue
   still holds the key, and its id was returned; or `tq_step_put`
   found the step already recorded, and kept its first output. Not an
   error.
   */
  TQ_DUPLICATE = 2,
  /*
   `tq_push` with a unique key stored no new task: the pending task
   holding the key took the push's payload or run time, as the options
   asked (`tq_push_options_set_replace_pending`,
   `tq_push_options_set_debounce_ms`), and its id was returned. A
   status of its own, not `TQ_OK` (which means a new task) nor
   `TQ_DUPLICATE` (which means the push's payload was dropped). Only a
   push with one of those options returns it. Not an error.
   */
  TQ_MERGED = 3,
  /*
   `tq_wait_for_event` or `tq_sleep` handed the task back to wait
   (its lease released, no attempt spent, its steps kept): the
   delivery is over; stop working on the task. Not an error.
   */
  TQ_SUSPENDED = 4,
  /*
   `tq_wait_for_event`'s wait timed out before an event came (now or
   at an earlier delivery); the task is still held. Not an error.
   */
  TQ_TIMEOUT = 5,
  /*
   A NULL or invalid pointer, bad UTF-8, an out-of-range option, or a
   handle used in a child process after `fork()`.
   */
  TQ_ERR_INVALID_ARGUMENT = -1,
  /*
   The payload is not a JSON text; nothing was stored.
   */
  TQ_ERR_INVALID_JSON = -2,
  /*
   The task's delivery is no longer current (its lease was recovered or
   taken by another worker), or it was already finished.
   */
  TQ_ERR_NOT_HELD = -3,
  /*
   The file stayed locked by other writers past the busy timeout;
   nothing was done. The call may be tried again.
   */
  TQ_ERR_BUSY = -4,
  /*
   The operating system refused: disk full, read-only file or
   directory, permissions, an I/O error. A write that fails this way may
   or may not have reached the disk.
   */
  TQ_ERR_IO = -5,
  /*
   The file is not an SQLite database, is corrupt, or has a tq schema
   newer than this library; it was left untouched. (SQLite also reports
   an I/O error while reading the file's header as corruption.)
   */
  TQ_ERR_NOT_A_DATABASE = -6,
  /*
   A bug in tq, including a caught panic. The handle remains usable.
   */
  TQ_ERR_INTERNAL = -7,
  /*
   A pull's wait was ended by `tq_interrupt` on its handle or by its
   `tq_cancel`; no task was claimed.
   */
  TQ_ERR_INTERRUPTED = -8,
  /*
   The write was committed but may not last, or may not have been
   committed: on an SQLite file at `TQ_DURABILITY_FULL`, flushing the
   committed write to the disk failed, so it may or may not survive a
   power loss (and this process then refuses writes to the file with
   `TQ_ERR_IO` until every handle on it is closed); on PostgreSQL, the
   connection to the server was lost while the write was being
   committed. Either way a push may or may not have stored its task.
   Look before trying again, or push with a unique key so a retry
   cannot duplicate.
   */
  TQ_ERR_UNKNOWN_OUTCOME = -9,
  /*
   The task was cancelled (`tq_cancel_task`) while this delivery held
   it: the delivery is over, the task is now cancelled and is never
   delivered again. Stop working on it.
   */
  TQ_ERR_CANCELLED = -10,
  /*
   The push would take the queue's pending tasks over its cap
   (`tq_set_max_pending`), and no room was made within its
   `tq_push_options_set_wait_for_room_ms`: nothing was stored (of a
   batch, no task). Pushing again later may succeed.
   */
  TQ_ERR_FULL = -11,
} tq_status;

/*
 Values for `tq_options_set_durability`.
 */
typedef enum tq_durability {
  /*
   The default. A call returns only once its write is flushed to the
   disk: it survives a process crash and a power loss. Writes that
   arrive together share a flush, which runs while the next writes
   commit (about 10,000 flushes/s on a fast SSD).
   */
  TQ_DURABILITY_FULL = 0,
  /*
   A write survives a process crash; a power loss or OS crash may lose
   the most recent commits, never corrupting the file. Several times
   faster than FULL.
   */
  TQ_DURABILITY_NORMAL = 1,
} tq_durability;

/*
 Values for `tq_count`, `tq_list`, `tq_purge` and `tq_task_state`.
 */
typedef enum tq_state {
  /*
   Waiting to be claimed (possibly not yet due).
   */
  TQ_STATE_PENDING = 0,
  /*
   Claimed under a lease (possibly expired and not yet taken back).
   */
  TQ_STATE_LEASED = 1,
  /*
   Finished and kept as history (handles opened with history).
   */
  TQ_STATE_DONE = 2,
  /*
   Used up its attempts; kept with its last failure reason until
   retried (`tq_retry_dead`) or purged.
   */
  TQ_STATE_DEAD = 3,
  /*
   Cancelled (`tq_cancel_task`); kept with its reason (handles opened
   with history) until purged.
   */
  TQ_STATE_CANCELLED = 4,
} tq_state;

/*
 How an attempt ended, as `tq_task_attempt_outcome` returns it.
 */
typedef enum tq_attempt_outcome {
  /*
   Its holder failed it (`tq_fail`).
   */
  TQ_ATTEMPT_FAILED = 0,
  /*
   Its lease ran out before its holder finished, and tq took it back.
   */
  TQ_ATTEMPT_LEASE_EXPIRED = 1,
  /*
   Its holder's process (on PostgreSQL, its session) was found gone.
   */
  TQ_ATTEMPT_HOLDER_DIED = 2,
  /*
   The task was cancelled while held, and the delivery ended so.
   */
  TQ_ATTEMPT_CANCELLED = 3,
} tq_attempt_outcome;

/*
 Values for `tq_schedule_options_set_catch_up` and
 `tq_schedule_catch_up`: what the slots that came due while no handle
 drove a schedule become when one next does.
 */
typedef enum tq_catch_up {
  /*
   The latest due slot runs if it came due at most a minute ago;
   the others are skipped.
   */
  TQ_CATCH_UP_SKIP = 0,
  /*
   The latest due slot runs, however late: one run for all missed.
   The default.
   */
  TQ_CATCH_UP_ONE = 1,
  /*
   Every due slot runs, the latest `limit` of them, in slot order.
   */
  TQ_CATCH_UP_EACH = 2,
} tq_catch_up;

/*
 Values for `tq_push_options_set_on_parent_failure`.
 */
typedef enum tq_parent_failure {
  /*
   The default. When a task it waits for ends dead or cancelled, the
   waiting task is cancelled with a reason naming that task, and so in
   turn are the tasks waiting for it.
   */
  TQ_PARENT_FAILURE_CANCEL = 0,
  /*
   A task it waits for ending dead or cancelled counts as finished.
   */
  TQ_PARENT_FAILURE_RUN_ANYWAY = 1,
} tq_parent_failure;

/*
 Ends the wait of the pulls given it through `tq_pull_options_set_cancel`,
 and of `tq_wait_cancellation`, from any thread (see `tq_cancel_trigger`).
 */
typedef struct tq_cancel tq_cancel;

/*
 Options for `tq_open`.
 */
typedef struct tq_options tq_options;

/*
 Options for `tq_pull`.
 */
typedef struct tq_pull_options tq_pull_options;

/*
 Options for `tq_push`.
 */
typedef struct tq_push_options tq_push_options;

/*
 A handle on one named queue in one file. Thread-safe: one handle may be
 used from any number of threads at once.
 */
typedef struct tq_queue tq_queue;

/*
 A schedule listed by `tq_schedules`, owned by the caller. Reading it
 from several threads at once is safe; freeing it is not.
 */
typedef struct tq_schedule tq_schedule;

/*
 What `tq_schedule_add` and `tq_schedule_replace` store besides the
 schedule's name and payload: when its slots fall (required: a cron
 expression or an interval), its time zone, the push options of its
 tasks, and its catch-up policy.
 */
typedef struct tq_schedule_options tq_schedule_options;

/*
 A task owned by the caller: one delivery from `tq_pull` or
 `tq_pull_batch`, or a snapshot from `tq_list`, `tq_get_task` or
 `tq_wait_task` (which is not held, so finishing it answers
 TQ_ERR_NOT_HELD). Reading it from several threads
 at once is safe; freeing it is not.
 */
typedef struct tq_task tq_task;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Errors: the thread's last error message, and what each status means
 ===================================================================

 The message of the calling thread's last failed call.

 Returns the message of the last failed call on the calling thread, or
 `""` when no call on this thread has failed. Never NULL.

 Ownership: the string belongs to tq and stays valid until the next
 failed tq call on the same thread (a call that succeeds, including a
 `_free` of a live object, leaves it alone). Thread safety: each thread
 has its own message.
 */
const char *tq_last_error(void);

/*
 The description of a status.

 Returns a static, human-readable description of `status` (any integer;
 values tq does not know get `"unknown status"`). Never NULL.

 Thread safety: may be called from any thread.
 */
const char *tq_status_str(int32_t status);

/*
 Versions: the version of the library loaded at run time
 =======================================================

 The library's version, as a string.

 Returns the library's version as "MAJOR.MINOR.PATCH", a static string.
 Compare with the header's `TQ_VERSION` to detect a mismatch.

 Thread safety: may be called from any thread.
 */
const char *tq_version(void);

/*
 The library's version, as a number.

 Returns the library's version as MAJOR * 10000 + MINOR * 100 + PATCH,
 the same encoding as the header's `TQ_VERSION_NUMBER`.

 Thread safety: may be called from any thread.
 */
uint32_t tq_version_number(void);

/*
 Queues: opening and closing a handle, and the settings of its queue
 ===================================================================

 Opens a queue.

 Opens the queue in the SQLite file at `path` (UTF-8), creating the file
 and tq's `tq_*` tables as needed, and stores the handle in `*out`.
 `options` may be NULL for the defaults; it is only read during the call.
 A `path` that is a `postgres://` or `postgresql://` URL opens the queue
 in that PostgreSQL database instead, creating or migrating tq's schema.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL, empty or non-UTF-8
 path, NULL out, an option that means nothing for this kind of store, a
 URL this library cannot open), TQ_ERR_NOT_A_DATABASE (not SQLite,
 corrupt, or a newer tq schema; the file or schema is left untouched),
 TQ_ERR_IO (cannot open or create, cannot reach the server),
 TQ_ERR_BUSY. On error `*out` is set to NULL.

 Ownership: the caller owns the handle and frees it with `tq_close`.
 Thread safety: may be called from any thread; the handle may then be
 used from any number of threads at once, in the process that opened it.
 */
enum tq_status tq_open(const char *path, const struct tq_options *options, struct tq_queue **out);

/*
 Closes a queue handle.

 Closes a handle from `tq_open` and frees it. NULL is a no-op; call at
 most once per handle, after every other call on it has returned. Tasks
 pulled through the handle stay valid (free them with `tq_task_free`) and
 may be finished through another handle.

 In a child process after `fork()`, closing the parent's handle closes
 only the child's copy of its connection and releases nothing of the
 parent's.
 */
void tq_close(struct tq_queue *queue);

/*
 Ends the waits of the handle's pulls.

 Ends, with TQ_ERR_INTERRUPTED, the wait of every pull on this handle,
 now and from then on (a pull still takes a task that is ready). To stop
 worker threads: `tq_interrupt`, join them, then `tq_close`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue).
 Thread safety: safe from any thread, while other threads wait in pulls.
 */
enum tq_status tq_interrupt(struct tq_queue *queue);

/*
 Pauses the queue.

 Pauses the handle's queue for every process on its file (or PostgreSQL
 schema) until `tq_resume` or `until_unix_ms` (milliseconds since the
 Unix epoch; TQ_UNTIL_RESUMED for no end): pulls find nothing meanwhile
 (waiting pulls keep waiting and take a task once the pause ends);
 pushes are stored as usual. A new pause replaces the one in force.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, an end not in
 the future), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_pause(struct tq_queue *queue, int64_t until_unix_ms);

/*
 Resumes the queue.

 Ends the pause of the handle's queue, if any, and wakes its waiting
 pulls in every process.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_resume(struct tq_queue *queue);

/*
 When the queue's pause ends.

 Writes to `*out_until_unix_ms` when the pause of the handle's queue in
 force ends (TQ_UNTIL_RESUMED for no end), or 0 when it is not paused.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or
 `out_until_unix_ms`), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_paused_until(const struct tq_queue *queue, int64_t *out_until_unix_ms);

/*
 Limits how many tasks are leased at once.

 Limits the handle's queue to `limit` tasks leased at once (at least 1)
 across every process and machine on its file (or PostgreSQL schema),
 enforced inside each claim so that it holds under any race; expired
 leases and tasks recovered from dead holders hold no slot. Tasks leased
 beyond a new, lower limit keep their leases.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, a limit of 0:
 use `tq_clear_concurrency_limit`, or `tq_pause` to stop claims),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_concurrency_limit(struct tq_queue *queue, uint32_t limit);

/*
 Removes the concurrency limit.

 Removes the concurrency limit of the handle's queue, if any.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_clear_concurrency_limit(struct tq_queue *queue);

/*
 The queue's concurrency limit.

 Writes the concurrency limit of the handle's queue to `*out_limit`, or
 0 when it has none.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_limit`),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_concurrency_limit(const struct tq_queue *queue, uint32_t *out_limit);

/*
 Caps the queue's pending tasks.

 Caps the handle's queue at `cap` pending tasks, for every process and
 machine on its file (or PostgreSQL schema); 0 removes the cap. Pending
 tasks are those pushed and neither delivered nor ended: ready, delayed,
 waiting for other tasks or their group, waiting for a retry; leased
 tasks do not count. A push that would take the count over the cap
 stores nothing (of a batch, no task) and returns TQ_ERR_FULL, unless
 `tq_push_options_set_wait_for_room_ms` lets it wait for room; a push
 returning TQ_DUPLICATE adds nothing and is never refused. The check is
 made inside the push's transaction, so the cap holds under any race.
 Setting a cap removes no task: a queue over its new cap refuses pushes
 until it drains below.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_max_pending(struct tq_queue *queue, uint64_t cap);

/*
 The queue's cap on pending tasks.

 Writes the cap on pending tasks of the handle's queue to `*out_cap`, or
 0 when it has none.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_cap`),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_max_pending(const struct tq_queue *queue, uint64_t *out_cap);

/*
 Caps the pending tasks of each fairness key.

 Caps each fairness key of the handle's queue at `cap` pending tasks (as
 `tq_set_max_pending` counts them), for every process on its file,
 unless the key has a cap of its own (`tq_set_key_max_pending`); 0
 removes this default. The tasks pushed without a key share the empty
 key "", capped as any other. A push that would take a key over its cap
 stores nothing (of a batch, no task, whatever its other keys) and
 returns TQ_ERR_FULL, or waits for room as `tq_set_max_pending` says;
 the other keys are not affected. A cap makes the queue fair, as a push
 with a fairness key does. SQLite only: on PostgreSQL it returns
 TQ_ERR_INVALID_ARGUMENT and changes nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue; on PostgreSQL),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_max_pending_per_key(struct tq_queue *queue, uint64_t cap);

/*
 The default cap on the pending tasks of each fairness key.

 Writes the default cap on the pending tasks of each fairness key of the
 handle's queue (see `tq_set_max_pending_per_key`) to `*out_cap`, or 0
 when it has none.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_cap`; on
 PostgreSQL), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_max_pending_per_key(const struct tq_queue *queue, uint64_t *out_cap);

/*
 Caps the pending tasks of one fairness key.

 Caps fairness key `key` of the handle's queue (UTF-8, NUL-terminated, up
 to `TQ_MAX_UNIQUE_KEY_LEN` bytes; "" for the tasks pushed without one;
 copied) at `cap` pending tasks, in place of the default of
 `tq_set_max_pending_per_key`, higher or lower; 0 removes the key's own
 cap, so that the default applies to it again. A cap makes the queue
 fair. SQLite only: on PostgreSQL it returns TQ_ERR_INVALID_ARGUMENT and
 changes nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or key, a key too
 long or not UTF-8; nothing changes), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_key_max_pending(struct tq_queue *queue, const char *key, uint64_t cap);

/*
 The cap in force on the pending tasks of one fairness key.

 Writes the cap in force for fairness key `key` of the handle's queue to
 `*out_cap`: its own (`tq_set_key_max_pending`), else the queue's default
 (`tq_set_max_pending_per_key`), else 0.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, key or `out_cap`,
 a key too long or not UTF-8; on PostgreSQL), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_key_max_pending(const struct tq_queue *queue, const char *key, uint64_t *out_cap);

/*
 Sets the weight of a fairness key.

 Sets the weight of fairness key `key` of the handle's queue (UTF-8,
 NUL-terminated, up to `TQ_MAX_UNIQUE_KEY_LEN` bytes; the empty key ""
 stands for the tasks pushed without one; copied), for every process on
 its file: `TQ_MIN_FAIR_WEIGHT` to `TQ_MAX_FAIR_WEIGHT`, default 1.
 Among the keys with ready tasks, each gets deliveries in proportion to
 its weight (see `tq_push_options_set_fair_key`). Setting a weight makes the queue fair,
 as a push with a fairness key does. SQLite only: on PostgreSQL it
 returns TQ_ERR_INVALID_ARGUMENT and changes nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or key, a key too
 long or not UTF-8, a weight out of range or not a number; nothing
 changes), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_fair_weight(struct tq_queue *queue, const char *key, double weight);

/*
 The weight of a fairness key.

 Writes the weight of fairness key `key` of the handle's queue to
 `*out_weight`: 1 unless one was set (see `tq_set_fair_weight`).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, key or
 `out_weight`, a key too long or not UTF-8; on PostgreSQL), TQ_ERR_BUSY,
 TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_fair_weight(const struct tq_queue *queue, const char *key, double *out_weight);

/*
 Limits how many tasks are delivered in a window of time.

 Allows at most `claims` deliveries of the handle's queue (1 to 100,000)
 in any window of `per_ms` milliseconds (1 ms to 366 days), across every
 process and machine on its file (or PostgreSQL schema), without a
 coordinator: each claim takes a slot last used a window ago or more,
 inside its transaction, or claims nothing (waiting pulls wait for a
 slot). Windows are measured on the claims' times, read once each claim
 holds the write lock, in whole milliseconds. Setting the rate in force
 again changes nothing (every worker may declare it at start without
 granting a new burst); a changed rate keeps the most recent uses, and a
 new one starts with every slot free.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, values out of
 range), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_set_rate_limit(struct tq_queue *queue, uint32_t claims, uint64_t per_ms);

/*
 Removes the rate limit.

 Removes the rate limit of the handle's queue, if any.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_clear_rate_limit(struct tq_queue *queue);

/*
 The queue's rate limit.

 Writes the rate limit of the handle's queue to `*out_claims` and
 `*out_per_ms`, or 0 to both when it has none.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out-pointer),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_rate_limit(const struct tq_queue *queue,
                             uint32_t *out_claims,
                             uint64_t *out_per_ms);

/*
 Checkpoints the write-ahead log.

 Copies the file's write-ahead log into the database and truncates it,
 waiting up to the busy timeout for readers to move on, and writes the
 log's size afterwards to `*out_wal_bytes` when it is not NULL. tq also
 checkpoints by itself when the log grows past 16 MiB; call this at quiet
 moments to keep the files small.

 Returns TQ_OK, or TQ_ERR_BUSY (a reader still used the log: part of it
 remains; the size is still written), TQ_ERR_INVALID_ARGUMENT (NULL
 queue; a PostgreSQL queue, which has no log file of tq's own),
 TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_checkpoint(struct tq_queue *queue, int64_t *out_wal_bytes);

/*
 The size of the write-ahead log.

 Writes the size of the file's write-ahead log (`-wal` file), in bytes,
 to `*out_wal_bytes`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out; a
 PostgreSQL queue), TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_wal_size(const struct tq_queue *queue, int64_t *out_wal_bytes);

/*
 Locations: a file path or URL as messages may show it
 =====================================================

 A location as it may be shown, without its password.

 Writes `location` (a file path or a URL, UTF-8) as it may be shown in
 messages into `buf`: a URL without the password of its user information
 and without any `password` query parameter; a file path unchanged. At
 most `cap - 1` bytes are written (cut at a character boundary), then a
 NUL; `*len` (when `len` is not NULL) receives the length of the whole
 result without its NUL, so a result was cut when `*len >= cap`. With
 `cap` 0, `buf` may be NULL and only `*len` is set: call once to learn
 the size, then again with a buffer of `*len + 1` bytes.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL or non-UTF-8
 `location`, NULL `buf` with `cap` above 0); then `buf` is untouched.

 Ownership: `buf` belongs to the caller; tq keeps no pointer. Thread
 safety: may be called from any thread.
 */
enum tq_status tq_location_redacted(const char *location, char *buf, size_t cap, size_t *len);

/*
 Pushing: storing new tasks
 ==========================

 Pushes a task.

 Stores the JSON text `payload[0..len]` (UTF-8, no terminator needed) as
 a new pending task, exactly as given, and writes its id to `*out_id`
 when `out_id` is not NULL. `options` may be NULL for the defaults.
 Returns once the task is stored at the handle's durability.

 Returns TQ_OK, TQ_DUPLICATE (the options' unique key is held by a task
 of the queue: nothing is stored, and `*out_id` is that task's id),
 TQ_MERGED (the options replace or debounce the pending task holding
 the key, `tq_push_options_set_replace_pending`, and it took the push:
 `*out_id` is its id), or
 TQ_ERR_INVALID_ARGUMENT (NULL queue or payload, bad
 UTF-8, len over the handle's limit, `TQ_MAX_PAYLOAD_LEN` unless set with
 `tq_options_set_max_payload_len`), TQ_ERR_INVALID_JSON, TQ_ERR_BUSY,
 TQ_ERR_IO. On any error nothing is stored (for TQ_ERR_IO: unless the
 disk took the write before failing).

 Ownership: tq copies the payload; the caller keeps it.
 Thread safety: any number of threads may push on one handle at once.
 */
enum tq_status tq_push(struct tq_queue *queue,
                       const char *payload,
                       size_t len,
                       const struct tq_push_options *options,
                       int64_t *out_id);

/*
 Pushes several tasks with the same options, all or none.

 Stores `count` JSON texts as new pending tasks in one transaction, in
 order: all of them or none. `payloads[i]` points to `lens[i]` bytes of
 UTF-8. `options` (may be NULL) applies to every task and must not have a
 unique key. Writes the new ids to `out_ids[0..count]` when `out_ids` is
 not NULL. `count` 0 stores nothing and succeeds.

 Returns TQ_OK, or TQ_ERR_INVALID_JSON or TQ_ERR_INVALID_ARGUMENT (a
 NULL array or payload, bad UTF-8, a payload over the limit, a unique
 key) with a message naming the index of the first bad payload;
 TQ_ERR_BUSY, TQ_ERR_IO. On any error nothing is stored.

 Ownership: tq copies the payloads. Thread safety: as `tq_push`.
 */
enum tq_status tq_push_batch(struct tq_queue *queue,
                             const char *const *payloads,
                             const size_t *lens,
                             size_t count,
                             const struct tq_push_options *options,
                             int64_t *out_ids);

/*
 Pushes several tasks, each with its own options, all or none.

 Stores `count` JSON texts as new tasks in one transaction, in order,
 each with its own options, as `tq_push` would: all of them or none.
 `payloads[i]` points to `lens[i]` bytes of UTF-8; `options[i]` may be
 NULL for the defaults (`options` itself may be NULL for all defaults).
 An item may wait for an earlier one (`tq_push_options_add_after_item`),
 so a graph is stored whole; an item whose unique key a task holds
 stores nothing, and an item waiting for it waits for that task. Writes
 each item's id (new, or of the task holding its key) to
 `out_ids[0..count]` when `out_ids` is not NULL. `count` 0 stores
 nothing and succeeds.

 Returns TQ_OK, or TQ_ERR_INVALID_JSON or TQ_ERR_INVALID_ARGUMENT (a
 NULL array or payload, bad UTF-8, a payload over the limit, an item
 waiting for itself or a later one, a task to wait for that is not in
 the queue, or that is dead or cancelled for an item to be cancelled
 then) with a message naming the index of the first bad item;
 TQ_ERR_BUSY, TQ_ERR_IO. On any error nothing is stored.

 Ownership: tq copies the payloads and reads the options only during the
 call. Thread safety: as `tq_push`.
 */
enum tq_status tq_push_items(struct tq_queue *queue,
                             const char *const *payloads,
                             const size_t *lens,
                             const struct tq_push_options *const *options,
                             size_t count,
                             int64_t *out_ids);

/*
 Working: claiming tasks, then finishing, failing or renewing them
 =================================================================

 Claims the ready task first in line.

 Claims the ready task first in line under a lease and stores it in
 `*out`: the highest priority first, then the task ready longest (a
 pending task that is due, or one whose lease expired). Its attempt count
 goes up by one. No two holders ever hold the same task at once.
 `options` may be NULL for the defaults (a 30 s lease, no waiting).

 Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when no task
 was ready by the end of the options' wait, or TQ_ERR_INTERRUPTED (the
 wait was ended by `tq_interrupt` or the options' `tq_cancel`),
 TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO,
 TQ_ERR_NOT_A_DATABASE (the stored task is damaged).

 Ownership: the caller owns `*out` and frees it with `tq_task_free`.
 Thread safety: any number of threads may pull on one handle at once.
 */
enum tq_status tq_pull(struct tq_queue *queue,
                       const struct tq_pull_options *options,
                       struct tq_task **out);

/*
 Claims several ready tasks at once.

 Claims up to `max` ready tasks in one transaction, in the order
 `tq_pull` would return them, waiting as `tq_pull` does when none is
 ready. Stores them in `out_tasks[0..*out_count]`; the rest of
 `out_tasks` is set to NULL. `out_tasks` has room for `max` pointers.

 Returns TQ_OK with `*out_count` at least 1, TQ_EMPTY with `*out_count`
 0, or an error as `tq_pull` (with `*out_count` 0; `max` 0 is
 TQ_ERR_INVALID_ARGUMENT).

 Ownership: the caller owns each task and frees it with `tq_task_free`.
 Thread safety: as `tq_pull`.
 */
enum tq_status tq_pull_batch(struct tq_queue *queue,
                             const struct tq_pull_options *options,
                             size_t max,
                             struct tq_task **out_tasks,
                             size_t *out_count);

/*
 Finishes a delivery.

 Completes this delivery of `task`: the task is deleted (or kept as done
 on a handle opened with history). Succeeds as long as nobody else has
 taken the task since it was pulled, even past its lease. The task may
 have been pulled through another handle on the same file; it still must
 be freed with `tq_task_free`.

 Returns TQ_OK, or TQ_ERR_NOT_HELD (already finished, or the lease was
 recovered or taken by another worker: nothing changes), TQ_ERR_CANCELLED
 (the task was cancelled meanwhile: it ends as cancelled, not done),
 TQ_ERR_INVALID_ARGUMENT (NULL queue or task; a task pulled from another
 file or PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.

 Thread safety: any number of threads may finish on one handle at once.
 */
enum tq_status tq_finish(struct tq_queue *queue, const struct tq_task *task);

/*
 Finishes a delivery and keeps a result.

 Completes this delivery of `task` as `tq_finish` does, and keeps
 `result` (UTF-8 JSON, at most the handle's payload limit) with the task
 for any process to read (`tq_get_task`) or wait for (`tq_wait_task`):
 on a handle without history for its result retention
 (`tq_options_set_result_retention_ms`), with history as long as the
 done task.

 Returns TQ_OK, or TQ_ERR_INVALID_JSON (nothing changes: the task stays
 held), TQ_ERR_INVALID_ARGUMENT (NULL queue, task or result, not UTF-8,
 longer than the payload limit: nothing changes), or an error as
 `tq_finish`. `result` is only read during the call.

 Thread safety: any number of threads may finish on one handle at once.
 */
enum tq_status tq_finish_with_result(struct tq_queue *queue,
                                     const struct tq_task *task,
                                     const char *result);

/*
 Finishes a delivery and claims the next task, in one commit.

 Completes this delivery of `task` and claims the next ready task in the
 same transaction, storing it in `*out`: a worker draining a backlog
 pays one commit (one flush at TQ_DURABILITY_FULL) per task instead of
 two. It never waits: on TQ_EMPTY, wait for the next task with `tq_pull`.
 `options` (NULL for the defaults) sets the next task's lease and must
 not set a wait. `task` must still be freed with `tq_task_free`.

 Returns TQ_OK (finished, and `*out` set), TQ_EMPTY (finished; no task
 ready, `*out` NULL), or, with nothing finished or claimed,
 TQ_ERR_NOT_HELD (the delivery is no longer current), TQ_ERR_CANCELLED
 (the task was cancelled meanwhile, and now ends as cancelled),
 TQ_ERR_INVALID_ARGUMENT (NULL queue, task or out; options with a wait;
 a task pulled from another file or PostgreSQL schema), TQ_ERR_BUSY,
 TQ_ERR_IO.

 Ownership: the caller owns `*out` and frees it with `tq_task_free`.
 Thread safety: as `tq_pull`.
 */
enum tq_status tq_finish_and_pull(struct tq_queue *queue,
                                  const struct tq_task *task,
                                  const struct tq_pull_options *options,
                                  struct tq_task **out);

/*
 Finishes several deliveries in one commit.

 Completes `count` deliveries in one transaction. Writes, when
 `out_statuses` is not NULL, TQ_OK or TQ_ERR_NOT_HELD to
 `out_statuses[i]` for `tasks[i]`: a task not held changes nothing, as
 with `tq_finish`, and does not stop the others (a task cancelled
 meanwhile is reported not held, and ends as cancelled). The tasks must still be
 freed with `tq_task_free`. `count` 0 succeeds.

 Returns TQ_OK once the transaction committed (check `out_statuses`), or
 TQ_ERR_INVALID_ARGUMENT (NULL queue or array, a NULL or freed task, a
 task pulled from another file or PostgreSQL schema: nothing is
 finished), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: as `tq_finish`.
 */
enum tq_status tq_finish_batch(struct tq_queue *queue,
                               struct tq_task *const *tasks,
                               size_t count,
                               int32_t *out_statuses);

/*
 Finishes several deliveries and claims tasks, in one commit.

 Completes `count` deliveries and claims up to `max` ready tasks, as
 `tq_pull_batch` does, in one transaction: a worker's finished tasks and
 the claims of its free handlers share one commit (one flush at
 TQ_DURABILITY_FULL). Writes, when `out_statuses` is not NULL, to
 `out_statuses[i]` what `tq_finish` would have returned for `tasks[i]`:
 TQ_OK, TQ_ERR_NOT_HELD, or TQ_ERR_CANCELLED (cancelled meanwhile: it now
 ends as cancelled). A task not finished stops neither the others nor
 the claim. It never waits: `options` (NULL for the defaults) sets the
 new tasks' lease and must not set a wait. `count` 0 only claims; `max`
 0 only finishes, and `out_tasks` may then be NULL. The finished tasks
 must still be freed with `tq_task_free`.

 Returns, once the transaction committed, TQ_OK with `*out_count` at
 least 1 or TQ_EMPTY with `*out_count` 0 (check `out_statuses`); or, with
 nothing finished or claimed and `*out_count` 0,
 TQ_ERR_INVALID_ARGUMENT (NULL queue, tasks or out_count; NULL
 out_tasks with `max` above 0; a NULL or freed task; a task pulled from
 another file or PostgreSQL schema; options with a wait), TQ_ERR_BUSY,
 TQ_ERR_IO.

 Ownership: the caller owns each task written to `out_tasks[0..max]`
 and frees it with `tq_task_free`.
 Thread safety: as `tq_pull`.
 */
enum tq_status tq_finish_and_pull_batch(struct tq_queue *queue,
                                        struct tq_task *const *tasks,
                                        size_t count,
                                        int32_t *out_statuses,
                                        const struct tq_pull_options *options,
                                        size_t max,
                                        struct tq_task **out_tasks,
                                        size_t *out_count);

/*
 Fails a delivery: the task is retried later, or dead.

 Ends this delivery of `task` as failed, keeping `reason` (NUL-terminated
 UTF-8, cut to `TQ_MAX_REASON_LEN` bytes; NULL or "" for none) as its last
 error. The task is pending again after the handle's retry back-off, or,
 when this delivery was its last attempt, dead. The task must still be
 freed with `tq_task_free`.

 Returns TQ_OK, or TQ_ERR_NOT_HELD (the delivery is no longer current:
 nothing changes), TQ_ERR_CANCELLED (the task was cancelled meanwhile,
 and now ends as cancelled), TQ_ERR_INVALID_ARGUMENT (NULL queue or task,
 reason not UTF-8, a task pulled from another file or PostgreSQL schema),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: any number of threads may fail tasks on one handle at once.
 */
enum tq_status tq_fail(struct tq_queue *queue, const struct tq_task *task, const char *reason);

/*
 Renews a delivery's lease.

 Renews the lease of a held task: it now expires `lease_ms` milliseconds
 from now (1 ms to one year). Call it regularly while working on a long
 task. A lease that already expired may be renewed while nobody took the
 task, unless the queue is at its concurrency limit (the expired lease
 held no slot, and another claim may have taken it).

 Returns TQ_OK, or TQ_ERR_NOT_HELD (the lease was lost: stop working on
 the task, another worker may have it), TQ_ERR_CANCELLED (the task was
 cancelled: stop working on it; it ends as cancelled), TQ_ERR_INVALID_ARGUMENT (NULL
 queue or task, out of range, a task pulled from another file or
 PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_extend(struct tq_queue *queue, const struct tq_task *task, uint64_t lease_ms);

/*
 Renews a delivery's lease and records progress.

 Renews the lease of a held task as `tq_extend` does, and records
 `progress` (UTF-8 JSON, at most the handle's payload limit) with it, for
 anyone to read (`tq_get_task`, `tq_task_progress`), a later delivery of
 the task included.

 Returns TQ_OK, or TQ_ERR_INVALID_JSON, TQ_ERR_INVALID_ARGUMENT (NULL
 progress, not UTF-8, too long; nothing changes), or an error as
 `tq_extend`. `progress` is only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_extend_with_progress(struct tq_queue *queue,
                                       const struct tq_task *task,
                                       uint64_t lease_ms,
                                       const char *progress);

/*
 Hands a delivery back for later, without using an attempt.

 Hands this delivery of `task` back: the task runs again `delay_ms`
 milliseconds from now (0 to one year), and this delivery does not count
 as an attempt. For a worker that cannot do the task yet. The task must
 still be freed with `tq_task_free`.

 Returns TQ_OK, or TQ_ERR_NOT_HELD (the delivery is no longer current:
 nothing changes), TQ_ERR_CANCELLED (the task was cancelled meanwhile),
 TQ_ERR_INVALID_ARGUMENT (NULL queue or task, delay out of range, a task
 pulled from another file or PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_snooze(struct tq_queue *queue, const struct tq_task *task, uint64_t delay_ms);

/*
 Waits for a reason to stop working on a held task.

 Waits up to `timeout_ms` milliseconds (at most one year) for a reason
 to stop working on the held `task`, so that a worker stops at once
 rather than at its next `tq_extend`: run it on a thread beside the work.
 It only reads, once at the start and then when a cancellation of the
 queue is recorded in any process (about once a second as a safety net).
 `cancel` (NULL for none) ends the wait early: trigger it when the work
 is done.

 Returns TQ_ERR_CANCELLED once the task's cancellation (`tq_cancel_task`)
 is recorded: stop working; the delivery's next `tq_extend`, `tq_finish`,
 `tq_fail` or `tq_snooze` returns TQ_ERR_CANCELLED and ends the task as
 cancelled. TQ_ERR_NOT_HELD once the delivery is over (finished, failed,
 snoozed, or its lease expired and the task was taken back; or `task`
 was listed, not pulled). TQ_EMPTY when
 the timeout passed first. TQ_ERR_INTERRUPTED when `cancel` was triggered
 or `tq_interrupt` called on the handle. Or TQ_ERR_INVALID_ARGUMENT (NULL
 queue or task, a task from another file or PostgreSQL schema, timeout
 out of range, `cancel` not a live tq_cancel), TQ_ERR_BUSY, TQ_ERR_IO.
 Nothing changes in any case.

 Ownership: `task` and `cancel` stay the caller's and must stay alive
 until the call returns.
 Thread safety: may run concurrently with any other call, on the same
 task too (the worker keeps using it meanwhile).
 */
enum tq_status tq_wait_cancellation(const struct tq_queue *queue,
                                    const struct tq_task *task,
                                    uint64_t timeout_ms,
                                    const struct tq_cancel *cancel);

/*
 Steps: checkpoints that a later delivery of a task reads back
 =============================================================

 Records a step of a held task.

 Records step `name` (UTF-8, 1 to TQ_MAX_STEP_NAME_LEN bytes) of the task this delivery
 holds with its output `json` (UTF-8 JSON, at most the handle's payload
 limit), in one commit that checks the delivery is still current. Every
 later delivery of the task reads it back with `tq_step_get` instead of
 running the step again.

 Returns TQ_OK once stored; TQ_DUPLICATE when the task already has a
 step of that name, whose first output is kept (first write wins);
 TQ_ERR_NOT_HELD when the delivery is no longer current (or `task` was
 listed, not pulled); TQ_ERR_CANCELLED when the task was cancelled;
 TQ_ERR_INVALID_JSON; TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8,
 a name or output too long); TQ_ERR_BUSY, TQ_ERR_IO. Only TQ_OK stores
 anything.

 Ownership: `name` and `json` are only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_step_put(struct tq_queue *queue,
                           const struct tq_task *task,
                           const char *name,
                           const char *json);

/*
 Reads a recorded step of a task.

 Reads the output recorded for step `name` of `task` (a delivery from
 `tq_pull`, current or not) by this delivery or any earlier one, into
 `*out_json`.

 Returns TQ_OK with `*out_json` set, TQ_EMPTY with `*out_json` NULL
 when the step was never recorded (or was cleared), or
 TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a listed task),
 TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: the caller owns `*out_json` and frees it with
 `tq_string_free`.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_step_get(const struct tq_queue *queue,
                           const struct tq_task *task,
                           const char *name,
                           char **out_json);

/*
 Frees a string from tq.

 Frees a string tq handed to the caller (`tq_step_get`). NULL is a
 no-op; call at most once per string. A pointer that is not a live
 string from tq is left alone, and says so in `tq_last_error`.

 Ownership: the string is tq's to free, never `free()`'s.
 Thread safety: may run on any thread, once no other uses the string.
 */
void tq_string_free(char *text);

/*
 Clears the steps recorded after a named step, for a retry.

 Deletes the steps of task `id` of the queue recorded after its step
 `name`, so that its next delivery runs them again ("retry from step
 `name`"); the steps up to `name` are kept. `tq_retry_dead` keeps every
 step: clear them first. Stores how many were deleted in `*out_cleared`
 when it is not NULL.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or name, bad
 UTF-8, no task `id` in the queue, a task held by a worker, no step
 `name`; nothing changes), TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: `name` is only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_clear_steps_after(struct tq_queue *queue,
                                    int64_t id,
                                    const char *name,
                                    uint64_t *out_cleared);

/*
 Events and durable sleep: a held task waits for a signal, or sleeps
 ===================================================================

 Sends an event under a key.

 Sends an event under `key` (UTF-8, 1 to TQ_MAX_EVENT_KEY_LEN bytes)
 with payload `json` (UTF-8 JSON, at most the handle's payload limit),
 in one commit. When tasks of the queue wait for `key`
 (`tq_wait_for_event`), the one that has waited longest takes it and is
 ready at once (a blocked `tq_pull` in any process wakes up); the others
 keep waiting for the next event. Otherwise the event is kept for
 `retention_ms` (0: 7 days), behind any other kept under `key`: waits
 take them in the order they were sent, one each. Stores in
 `*out_task_id`, when it is not NULL, the id of the task that took the
 event, or 0 when it was kept.

 Returns TQ_OK, TQ_ERR_INVALID_JSON, TQ_ERR_INVALID_ARGUMENT (NULL
 queue, key or json, bad UTF-8, a key or payload too long), TQ_ERR_BUSY,
 TQ_ERR_IO. Only TQ_OK stores anything.

 Ownership: `key` and `json` are only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_signal(struct tq_queue *queue,
                         const char *key,
                         const char *json,
                         uint64_t retention_ms,
                         int64_t *out_task_id);

/*
 Waits for an event under a key, suspending the held task meanwhile.

 Waits up to `timeout_ms` for an event under `key` for the task this
 delivery holds. An event kept under `key` is taken at once: TQ_OK with
 its payload in `*out_json`, and the task stays held. Otherwise the task
 is suspended until an event comes or the timeout passes, spending no
 attempt and keeping its steps: TQ_SUSPENDED, and the worker must stop
 working on it (free it; its delivery is over). Its next delivery runs
 the handler again, and the same call returns TQ_OK with the event's
 payload, or TQ_TIMEOUT, as recorded among the task's steps
 (`tq:event:KEY`, `tq:timeout:KEY`): every later call for `key` gives
 the same answer. A `timeout_ms` of 0 never suspends.

 Returns TQ_OK with `*out_json` set; TQ_TIMEOUT or TQ_SUSPENDED with
 `*out_json` NULL; TQ_ERR_NOT_HELD when the delivery is no longer
 current (or `task` was listed, not pulled); TQ_ERR_CANCELLED;
 TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a key too long);
 TQ_ERR_BUSY, TQ_ERR_IO. An error changes nothing.

 Ownership: the caller owns `*out_json` and frees it with
 `tq_string_free`; `key` is only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_wait_for_event(struct tq_queue *queue,
                                 const struct tq_task *task,
                                 const char *key,
                                 uint64_t timeout_ms,
                                 char **out_json);

/*
 Sleeps the held task for a time, durably.

 Sleeps the task this delivery holds for `duration_ms` from the first
 call of the sleep named `name` (UTF-8, 1 to TQ_MAX_SLEEP_NAME_LEN
 bytes), as `tq_sleep_until` does.

 Returns as `tq_sleep_until` does.

 Ownership: `name` is only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_sleep(struct tq_queue *queue,
                        const struct tq_task *task,
                        const char *name,
                        uint64_t duration_ms);

/*
 Sleeps the held task until a time, durably.

 The sleep named `name` (UTF-8, 1 to TQ_MAX_SLEEP_NAME_LEN bytes) of
 the task this delivery holds records its end, `unix_ms` (ms since the
 Unix epoch), among the task's steps (`tq:sleep:NAME`) at its first
 call; every later call reads it. Before the end, the task is suspended
 until then, spending no attempt and keeping its steps: TQ_SUSPENDED,
 and the worker must stop working on it (free it; its delivery is
 over). Once the end has passed, the call returns TQ_OK and the task
 stays held: the handler run again by the next delivery goes on past
 the sleep.

 Returns TQ_OK or TQ_SUSPENDED; TQ_ERR_NOT_HELD when the delivery is no
 longer current (or `task` was listed, not pulled); TQ_ERR_CANCELLED;
 TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a name too long);
 TQ_ERR_BUSY, TQ_ERR_IO. An error changes nothing.

 Ownership: `name` is only read during the call.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_sleep_until(struct tq_queue *queue,
                              const struct tq_task *task,
                              const char *name,
                              int64_t unix_ms);

/*
 Tasks: reading a task that tq handed out, and freeing it
 ========================================================

 The task's id.

 Returns the task's id (as returned by `tq_push`), or 0 when `task` is
 NULL. Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_id(const struct tq_task *task);

/*
 The token of the task's delivery: with the task's id, it names the
 delivery in SQL, as `tq_finish(id, token)` of tq's SQLite extension and
 PostgreSQL's `tq.finish(id, token)` take it, to finish the task in the
 application's own transaction.

 Returns the token for a task from `tq_pull` or
 `tq_pull_batch`, and 0 for a task that is not a delivery (from
 `tq_list`, `tq_get_task` or `tq_wait_task`) or when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_token(const struct tq_task *task);

/*
 The task's payload.

 Returns the task's payload, the JSON text exactly as pushed, followed by
 a NUL byte, and stores its length (without the NUL) in `*len` when `len`
 is not NULL. Returns NULL (and length 0) when `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_payload(const struct tq_task *task, size_t *len);

/*
 How many times the task has been claimed.

 Returns how many times the task has been claimed, this delivery
 included: 1 on the first delivery. Returns 0 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
uint32_t tq_task_attempts(const struct tq_task *task);

/*
 The task's priority.

 Returns the task's priority, or 0 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int32_t tq_task_priority(const struct tq_task *task);

/*
 How many deliveries the task gets.

 Returns how many deliveries the task gets before a failure makes it
 dead, or 0 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
uint32_t tq_task_max_attempts(const struct tq_task *task);

/*
 When the task became ready.

 Returns when the task became (or becomes) ready, in milliseconds since
 the Unix epoch, or 0 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_run_at_unix_ms(const struct tq_task *task);

/*
 The task's expiry.

 Returns when the task's first delivery may no longer start
 (`tq_push_options_set_expire_after_ms`), in milliseconds since the Unix
 epoch, or 0 when it has none (a retry of the dead clears it), was
 pulled rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`,
 or `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_expires_at_unix_ms(const struct tq_task *task);

/*
 The task's deadline.

 Returns when no delivery of the task may start any more
 (`tq_push_options_set_deadline_after_ms`), in milliseconds since the
 Unix epoch, or 0 when it has none (a retry of the dead clears it), was
 pulled rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`,
 or `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_deadline_unix_ms(const struct tq_task *task);

/*
 The task's state.

 Returns the task's state (a `tq_state` value) when it was pulled
 (TQ_STATE_LEASED) or listed, or -1 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
int32_t tq_task_state(const struct tq_task *task);

/*
 Why the task's previous delivery ended.

 Returns why the task's previous delivery ended (the reason given to
 `tq_fail`, or tq's words for a lost lease or a dead holder), or NULL
 when none did or `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_last_error(const struct tq_task *task);

/*
 The result the task was finished with.

 Returns the JSON result the task's finish stored
 (`tq_finish_with_result`), or NULL when it has none, was pulled rather
 than read by `tq_get_task`, `tq_wait_task` or `tq_list`, or `task` is
 NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_result(const struct tq_task *task);

/*
 The progress the task last recorded.

 Returns the JSON progress the task's last heartbeat recorded
 (`tq_extend_with_progress`), or NULL as `tq_task_result` does.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_progress(const struct tq_task *task);

/*
 The tasks a pulled task waited for.

 Returns the ids of the tasks a pulled task was pushed to wait for
 (`tq_push_options_add_after`), ascending, and stores how many in
 `*out_count` (when not NULL): each has ended, so a worker may read
 what they left. NULL with count 0 when there are none, for a listed
 task, or when `task` is NULL.

 Ownership: the array belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const int64_t *tq_task_parents(const struct tq_task *task, size_t *out_count);

/*
 The task's ordered group.

 Returns the key of the ordered group a listed task was pushed to
 (`tq_push_options_set_group`), or NULL when it has none, was pulled
 rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`, or
 `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_group(const struct tq_task *task);

/*
 The tasks a listed task still waits for.

 Returns the ids of the tasks a listed task still waits for, ascending
 (empty unless it is pending and blocked), and stores how many in
 `*out_count` (when not NULL). NULL with count 0 when there are none,
 for a pulled task, or when `task` is NULL.

 Ownership: the array belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const int64_t *tq_task_waiting_for(const struct tq_task *task, size_t *out_count);

/*
 How many steps a task read by `tq_get_task` lists.

 Returns how many steps the task's deliveries recorded (`tq_step_put`),
 as read by `tq_get_task` or `tq_wait_task`; 0 for a pulled task, a task
 of `tq_list` (which reads no steps), or when `task` is NULL. Index
 them from 0, in the order they were recorded, with
 `tq_task_step_name`, `tq_task_step_output` and
 `tq_task_step_recorded_at_unix_ms`.

 Thread safety: safe on a task read by several threads.
 */
size_t tq_task_step_count(const struct tq_task *task);

/*
 The name of a listed step.

 Returns the name of step `index` (from 0, in recording order) of a task
 read by `tq_get_task`, or NULL when `index` is not below
 `tq_task_step_count` or `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_step_name(const struct tq_task *task, size_t index);

/*
 The output of a listed step.

 Returns the JSON output recorded for step `index` of a task read by
 `tq_get_task`, or NULL as `tq_task_step_name` does.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_step_output(const struct tq_task *task, size_t index);

/*
 When a listed step was recorded.

 Returns when step `index` of a task read by `tq_get_task` was recorded,
 in milliseconds since the Unix epoch (the server's clock on
 PostgreSQL), or 0 as `tq_task_step_name` returns NULL.

 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_step_recorded_at_unix_ms(const struct tq_task *task, size_t index);

/*
 How many ended attempts a task read by `tq_get_task` lists.

 Returns how many of the task's deliveries ended without finishing it
 (failed, lease taken back, cancelled while held) are kept with it: the
 newest TQ_ATTEMPTS_KEPT, as read by `tq_get_task` or `tq_wait_task`; 0
 for a pulled task, a task of `tq_list` (which reads none), or when
 `task` is NULL. Index them from 0, oldest first, with the
 `tq_task_attempt_*` calls.

 Thread safety: safe on a task read by several threads.
 */
size_t tq_task_attempt_count(const struct tq_task *task);

/*
 Which delivery a listed attempt was.

 Returns the number of attempt `index` (from 0, oldest first) of a task
 read by `tq_get_task`: 1 for the task's first delivery, counted again
 from 1 after `tq_retry_dead`; 0 when `index` is not below
 `tq_task_attempt_count` or `task` is NULL.

 Thread safety: safe on a task read by several threads.
 */
uint32_t tq_task_attempt_number(const struct tq_task *task, size_t index);

/*
 How a listed attempt ended.

 Returns how attempt `index` of a task read by `tq_get_task` ended (a
 `tq_attempt_outcome` value), or -1 as `tq_task_attempt_number` returns 0.

 Thread safety: safe on a task read by several threads.
 */
int32_t tq_task_attempt_outcome(const struct tq_task *task, size_t index);

/*
 Why a listed attempt ended.

 Returns the reason attempt `index` of a task read by `tq_get_task`
 ended with (the one given to `tq_fail`, or the one tq wrote when it
 took the lease back or a cancellation ended it), or NULL when it has
 none, `index` is not below `tq_task_attempt_count` or `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_attempt_reason(const struct tq_task *task, size_t index);

/*
 Who held a listed attempt.

 Returns the id of the holder of attempt `index` of a task read by
 `tq_get_task` (a process on SQLite, a connection on PostgreSQL, as
 `tq serve` shows holders), or 0 when unknown, `index` is not below
 `tq_task_attempt_count` or `task` is NULL.

 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_attempt_holder_id(const struct tq_task *task, size_t index);

/*
 The process id of a listed attempt's holder.

 Returns the process id of the holder of attempt `index` of a task read
 by `tq_get_task` (SQLite only), or 0 when unknown (always on
 PostgreSQL), `index` is not below `tq_task_attempt_count` or `task` is
 NULL.

 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_attempt_holder_pid(const struct tq_task *task, size_t index);

/*
 When a listed attempt started.

 Returns when attempt `index` of a task read by `tq_get_task` was
 claimed, in milliseconds since the Unix epoch (the server's clock on
 PostgreSQL), or 0 when unknown, `index` is not below
 `tq_task_attempt_count` or `task` is NULL.

 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_attempt_started_at_unix_ms(const struct tq_task *task, size_t index);

/*
 When a listed attempt ended.

 Returns when attempt `index` of a task read by `tq_get_task` ended, in
 milliseconds since the Unix epoch (the server's clock on PostgreSQL),
 or 0 when `index` is not below `tq_task_attempt_count` or `task` is
 NULL. Its duration is this minus `tq_task_attempt_started_at_unix_ms`,
 when that is not 0.

 Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_attempt_ended_at_unix_ms(const struct tq_task *task, size_t index);

/*
 Frees a task.

 Frees a task from `tq_pull`, `tq_pull_batch`, `tq_list`, `tq_get_task`
 or `tq_wait_task`. NULL is a no-op; call at most once per
 task. Freeing does not finish the task: an unfinished task becomes
 ready again when its lease expires or its holder is recovered.
 */
void tq_task_free(struct tq_task *task);

/*
 Managing tasks: outcomes, cancelling, counts, lists, retries, recovery
 ======================================================================

 Reads a task by its id.

 Reads task `id` of the queue as it is now, with its result and
 progress, into `*out`.

 Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when the queue
 has no such task (never pushed, or ended and not kept), or
 TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: the caller owns `*out` and frees it with `tq_task_free`; it
 is a snapshot, not held.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_get_task(const struct tq_queue *queue, int64_t id, struct tq_task **out);

/*
 Waits for a task to end.

 Waits up to `timeout_ms` milliseconds (0 to one year) for task `id` of
 the queue to end, and stores it as it ended in `*out`: TQ_STATE_DONE
 with its result (`tq_task_result`), TQ_STATE_DEAD or
 TQ_STATE_CANCELLED with its reason (`tq_task_last_error`). A task that
 has ended already answers at once. The wait only reads, and wakes when
 the task ends through this process or, through another, by a write that
 rings the queue's waiters (else it looks as often as a waiting
 `tq_pull`). A task the wait saw not yet ended that then left the store
 (finished without a result on a handle without history, cancelled
 there, or purged) has ended too: it is stored as last seen, as
 TQ_STATE_DONE without a result. `cancel`, when not NULL, ends the wait
 once triggered (`tq_cancel_trigger`, from any thread), as it ends a
 waiting `tq_pull`.

 Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when the
 timeout passed first, TQ_ERR_INVALID_ARGUMENT (NULL queue or out,
 timeout out of range, no task `id`, or one that ended without being
 kept: on a handle without history, finish it with a result to wait for
 it), TQ_ERR_INTERRUPTED (`cancel` triggered, or after `tq_interrupt`),
 TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: the caller owns `*out` and frees it with `tq_task_free`;
 `cancel` is borrowed for the call and must outlive it.
 Thread safety: any number of threads may wait on one handle at once.
 */
enum tq_status tq_wait_task(const struct tq_queue *queue,
                            int64_t id,
                            uint64_t timeout_ms,
                            const struct tq_cancel *cancel,
                            struct tq_task **out);

/*
 Waits for a change that may end a wait for tasks.

 Waits up to `timeout_ms` milliseconds (at most one year) for a change
 that may end a wait for a task's outcome (`tq_wait_task`) or a
 delivery (`tq_wait_cancellation`), so that one thread can wait for any
 number of tasks: after each return, read again the tasks waited for
 (`tq_wait_task` or `tq_wait_cancellation` with a zero timeout) and call
 again with the mark it wrote. It wakes for a write to the queue in this
 process, a cancellation recorded in any process, or a commit of another
 process (seen as often as a waiting `tq_pull` sees one). It only reads.

 `seen` is a mark written by an earlier call: a change since then returns
 at once. To miss nothing, take a mark first (`timeout_ms` 0, any
 `seen`), then read the tasks, then wait with the mark. `cancel` (NULL
 for none) ends the wait early.

 Returns TQ_OK with the mark now in `*out_mark` when something may have
 changed (a cancellation returns even when the mark did not move), or
 TQ_EMPTY with `*out_mark` = `seen` when the timeout passed first.
 TQ_ERR_INTERRUPTED when `cancel` was triggered or `tq_interrupt` called
 on the handle. Or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_mark,
 timeout out of range, `cancel` not a live tq_cancel), TQ_ERR_BUSY,
 TQ_ERR_IO; `*out_mark` is then left as it was.

 Ownership: `cancel` stays the caller's and must stay alive until the
 call returns.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_wait_change(const struct tq_queue *queue,
                              uint64_t seen,
                              uint64_t timeout_ms,
                              const struct tq_cancel *cancel,
                              uint64_t *out_mark);

/*
 Cancels a task by its id.

 Cancels task `id` of the handle's queue, keeping `reason`
 (NUL-terminated UTF-8, cut to `TQ_MAX_REASON_LEN` bytes; NULL or "" for
 none) as its last error. A pending, delayed or dead task leaves the line
 at once (kept as TQ_STATE_CANCELLED on a handle with history, deleted
 otherwise) and `*out_state`, when not NULL, is set to
 TQ_STATE_CANCELLED. A leased task is never delivered again; its holder
 learns of it at its next `tq_extend`, `tq_finish`, `tq_fail` or
 `tq_snooze`, which return TQ_ERR_CANCELLED; `*out_state` is then set to
 TQ_STATE_LEASED. If the holder never calls again, the task ends as
 cancelled once its lease has run out, at the next claim of any queue of
 the file (or `tq_recover`). Cancelling a cancelled task again changes nothing and
 reports the same.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, reason not
 UTF-8, no task `id` in this queue, the task is done: nothing changes),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_cancel_task(struct tq_queue *queue,
                              int64_t id,
                              const char *reason,
                              int32_t *out_state);

/*
 Counts the tasks in a state.

 Writes to `*out_count` how many tasks are in `state` (a `tq_state`
 value, passed as a plain integer).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_count,
 unknown state), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_count(const struct tq_queue *queue, int32_t state, int64_t *out_count);

/*
 Counts the ordered groups whose tasks wait for their turn.

 Writes to `*out_count` how many ordered groups of the handle's queue
 have tasks waiting for their turn behind the group's earlier tasks
 (`tq_push_options_set_group`); those tasks count as TQ_STATE_PENDING.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_count),
 TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_groups_waiting(const struct tq_queue *queue, int64_t *out_count);

/*
 How long the task ready longest has waited.

 Writes to `*out_age_ms` how long, in milliseconds, the task of the
 handle's queue that has been ready longest has waited.

 Returns TQ_OK, TQ_EMPTY (no task is ready; `*out_age_ms` is 0), or
 TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_oldest_ready_age_ms(const struct tq_queue *queue, int64_t *out_age_ms);

/*
 Lists a page of the tasks in a state.

 Lists a page of the handle's queue's tasks in `state`: up to `max` of
 them with ids above `after_id`, by id, stored in
 `out_tasks[0..*out_count]` (the rest set to NULL). Start with `after_id`
 0 and pass the last id of each page to get the next; a page shorter
 than `max` is the last. Listed tasks are snapshots, not held. A page
 reads the table from `after_id` on: a call for tools, not for a worker's
 loop.

 Returns TQ_OK (`*out_count` may be 0), or TQ_ERR_INVALID_ARGUMENT (NULL
 queue, out_tasks or out_count, unknown state), TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: the caller owns each task and frees it with `tq_task_free`.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_list(const struct tq_queue *queue,
                       int32_t state,
                       int64_t after_id,
                       size_t max,
                       struct tq_task **out_tasks,
                       size_t *out_count);

/*
 Retries a dead task.

 Makes the dead task `id` of the handle's queue pending again, ready now,
 with all its attempts ahead of it; a task of an ordered group waits,
 behind its group's newest unfinished task, for its turn.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue; no dead task
 `id` in this queue), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_retry_dead(struct tq_queue *queue, int64_t id);

/*
 Retries every dead task.

 Makes every dead task of the handle's queue pending again, as
 `tq_retry_dead` does, and writes how many to `*out_retried` when it is
 not NULL.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_retry_all_dead(struct tq_queue *queue, int64_t *out_retried);

/*
 Deletes ended tasks older than an age.

 Deletes the handle's queue's tasks in `state` (TQ_STATE_DONE,
 TQ_STATE_DEAD or TQ_STATE_CANCELLED) that got there at least `older_than_ms` milliseconds ago
 (0: all of them), and writes how many to `*out_purged` when it is not
 NULL.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, another state,
 age over INT64_MAX), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_purge(struct tq_queue *queue,
                        int32_t state,
                        uint64_t older_than_ms,
                        int64_t *out_purged);

/*
 Brings back the tasks of expired leases and dead holders.

 Returns to pending every leased task whose lease expired or whose holder
 process no longer exists on this machine, and writes how many to
 `*out_recovered` when it is not NULL. Tasks held by live processes, this
 one included, are untouched: safe to call at every start-up.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_recover(struct tq_queue *queue, int64_t *out_recovered);

/*
 Open options: the options object of `tq_open`
 =============================================

 Creates the options of `tq_open`.

 Creates an options object for `tq_open` holding the defaults: durability
 `TQ_DURABILITY_FULL`, a 5,000 ms busy timeout, no history, payloads up
 to `TQ_MAX_PAYLOAD_LEN` bytes, the queue named "default", 25 attempts
 per task, retries after 1,000 ms doubling up to 3,600,000 ms.

 Ownership: the caller owns the result and frees it with
 `tq_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_options *tq_options_new(void);

/*
 Frees open options.

 Frees an options object from `tq_options_new`. NULL is a no-op; call at
 most once per object.
 */
void tq_options_free(struct tq_options *options);

/*
 Chooses the queue.

 Chooses the queue a handle works on: one file holds any number of
 independent queues, each named by 1 to `TQ_MAX_QUEUE_NAME_LEN` bytes of
 UTF-8 (NUL-terminated; copied). Default "default".

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, empty,
 too long or not UTF-8; the object is then unchanged).
 */
enum tq_status tq_options_set_queue(struct tq_options *options, const char *name);

/*
 Sets the durability.

 Sets the durability: `TQ_DURABILITY_FULL` or `TQ_DURABILITY_NORMAL` (a
 plain integer, so any other value is an error rather than undefined
 behaviour).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
 the object is then unchanged).
 */
enum tq_status tq_options_set_durability(struct tq_options *options, int32_t durability);

/*
 Sets the busy timeout.

 Sets how long a call waits for other writers on the file before it
 fails with TQ_ERR_BUSY, in milliseconds (0 fails at once; at most one
 year). Default 5,000.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_busy_timeout_ms(struct tq_options *options, uint64_t timeout_ms);

/*
 Keeps finished tasks as history, or not.

 When `keep` is true, tasks finished through this handle are kept as
 done with their finish time (`tq_count`, `tq_purge`); when false
 (the default) they are deleted.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
 */
enum tq_status tq_options_set_keep_history(struct tq_options *options, bool keep);

/*
 Sets how long a result is kept.

 Sets how long a task finished with `tq_finish_with_result` through a
 handle opened with these options is kept for its result, when the
 handle keeps no history: 1 ms to one year (default 7 days). Later
 finishes with a result delete the tasks whose time has passed; with
 history, a result stays with its done task until `tq_purge`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_result_retention_ms(struct tq_options *options,
                                                  uint64_t retention_ms);

/*
 Sets the largest payload.

 Sets the largest payload a handle opened with these options pushes, in
 bytes: 1 to `TQ_MAX_PAYLOAD_LEN` (the default). A larger push fails with
 TQ_ERR_INVALID_ARGUMENT and stores nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_max_payload_len(struct tq_options *options, size_t limit);

/*
 Sets how many deliveries each task gets.

 Sets how many deliveries each task pushed through the handle gets before
 a failure makes it dead (at least 1; default 25). A push may override it
 with `tq_push_options_set_max_attempts`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
 */
enum tq_status tq_options_set_max_attempts(struct tq_options *options, uint32_t max_attempts);

/*
 Sets the pauses before retries.

 Sets the pauses before a failed task is retried: `min_ms` after the
 first failure, doubling with each attempt up to `max_ms`, with random
 jitter taking up to half off each pause. `min_ms` may be 0 (retry at
 once); `max_ms` must not be below it; both at most one year. Default
 1,000 and 3,600,000.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_retry_backoff_ms(struct tq_options *options,
                                               uint64_t min_ms,
                                               uint64_t max_ms);

/*
 Sets the size of the PostgreSQL connection pool.

 Sets how many connections to the PostgreSQL server a handle opened with
 these options keeps at most: 1 to 1,024 (default 4). That many of its
 calls run at once; further ones wait up to the busy timeout for a free
 connection. For a `postgres://` URL only: `tq_open` of an SQLite file
 with this set fails with TQ_ERR_INVALID_ARGUMENT.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_pool_size(struct tq_options *options, uint32_t size);

/*
 Names the PostgreSQL schema.

 Names the PostgreSQL schema that holds tq's tables (default "tq"): 1 to
 63 ASCII letters, digits and '_', not starting with a digit or "pg_".
 tq creates it when missing. For a `postgres://` URL only: `tq_open` of
 an SQLite file with this set fails with TQ_ERR_INVALID_ARGUMENT.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, bad
 UTF-8, a name tq does not accept; the object is then unchanged).
 */
enum tq_status tq_options_set_postgres_schema(struct tq_options *options, const char *name);

/*
 Push options: the options object of `tq_push` and its batch forms
 =================================================================

 Creates the options of a push.

 Creates an options object for `tq_push` holding the defaults: the task
 is ready at once, priority 0, the queue's maximum attempts, no unique key.

 Ownership: the caller owns the result and frees it with
 `tq_push_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_push_options *tq_push_options_new(void);

/*
 Frees push options.

 Frees an options object from `tq_push_options_new`. NULL is a no-op;
 call at most once per object.
 */
void tq_push_options_free(struct tq_push_options *options);

/*
 Delays the task.

 The task becomes ready `delay_ms` milliseconds after the push (at most
 one year). Replaces an earlier `tq_push_options_set_run_at_unix_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_push_options_set_delay_ms(struct tq_push_options *options, uint64_t delay_ms);

/*
 Lets the push wait for room under the queue's cap.

 When the queue is at its cap on pending tasks (`tq_set_max_pending`),
 the push waits up to `wait_ms` milliseconds (at most one year; default
 0: not at all) for room instead of returning TQ_ERR_FULL at once: it
 tries again when a task of the queue is delivered or ends (at once for
 those of this process, within 50 ms for other processes'), and returns
 TQ_ERR_FULL once the wait has passed, or TQ_ERR_INTERRUPTED after
 `tq_interrupt` on its handle. Of a `tq_push_batch`, the batch waits
 until all of it fits.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_push_options_set_wait_for_room_ms(struct tq_push_options *options,
                                                    uint64_t wait_ms);

/*
 Makes the task ready at a time.

 The task becomes ready at `unix_ms`, milliseconds since the Unix epoch
 (a time in the past means at once). Replaces an earlier
 `tq_push_options_set_delay_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
 */
enum tq_status tq_push_options_set_run_at_unix_ms(struct tq_push_options *options, int64_t unix_ms);

/*
 Gives the task an expiry after the push.

 The task's first delivery never starts once `after_ms` milliseconds
 (1 ms to one year) have passed since the push: a pull that meets the
 task then ends it as dead with the last error "expired" instead, and
 takes the next task. Retries, once the first delivery started in time,
 are not bound by it. A push whose run time (`tq_push_options_set_delay_ms`)
 is not before its expiry fails with TQ_ERR_INVALID_ARGUMENT: the task
 could never run. Replaces an earlier
 `tq_push_options_set_expire_at_unix_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_expire_after_ms(struct tq_push_options *options,
                                                   uint64_t after_ms);

/*
 Gives the task an expiry at a time.

 As `tq_push_options_set_expire_after_ms`, at `unix_ms`, milliseconds
 since the Unix epoch (a time already passed: the first pull that meets
 the task ends it). Replaces an earlier
 `tq_push_options_set_expire_after_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_expire_at_unix_ms(struct tq_push_options *options,
                                                     int64_t unix_ms);

/*
 Gives the task a deadline after the push.

 No delivery of the task, first or retry, starts once `after_ms`
 milliseconds (1 ms to one year) have passed since the push: a pull that
 meets the task then ends it as dead with the last error "deadline
 passed", and a `tq_fail` whose retry would fall at or after the
 deadline ends it so at once. A delivery running when the deadline
 passes runs to its end; its lease is renewed as any other. A push whose
 run time is not before its deadline fails with
 TQ_ERR_INVALID_ARGUMENT. Replaces an earlier
 `tq_push_options_set_deadline_unix_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_deadline_after_ms(struct tq_push_options *options,
                                                     uint64_t after_ms);

/*
 Gives the task a deadline at a time.

 As `tq_push_options_set_deadline_after_ms`, at `unix_ms`, milliseconds
 since the Unix epoch. Replaces an earlier
 `tq_push_options_set_deadline_after_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_deadline_unix_ms(struct tq_push_options *options,
                                                    int64_t unix_ms);

/*
 Sets the task's priority.

 Sets the task's priority: a ready task of higher priority is claimed
 before any of lower priority; equal priorities come out in the order
 they became ready. Any value; default 0.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
 */
enum tq_status tq_push_options_set_priority(struct tq_push_options *options, int32_t priority);

/*
 Sets how many deliveries the task gets.

 Sets how many deliveries the task gets before a failure makes it dead
 (at least 1), instead of the handle's default.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
 */
enum tq_status tq_push_options_set_max_attempts(struct tq_push_options *options,
                                                uint32_t max_attempts);

/*
 Gives the task a unique key.

 Gives the task a unique key: 1 to `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8
 (NUL-terminated; copied), or NULL to remove the key and its window.
 While a task with the key is pending or leased in the queue, `tq_push`
 stores nothing and returns TQ_DUPLICATE with that task's id. Only
 `tq_push` takes a unique key; `tq_push_batch` refuses one.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, empty, too
 long or not UTF-8; the object is then unchanged).
 */
enum tq_status tq_push_options_set_unique_key(struct tq_push_options *options, const char *key);

/*
 Keeps the unique key reserved after the task is done.

 Keeps the unique key reserved for `window_ms` milliseconds after the
 task is done (at most one year; default 0: the key is free once the
 task is done). Set the key first.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, no key set,
 out of range).
 */
enum tq_status tq_push_options_set_unique_for_ms(struct tq_push_options *options,
                                                 uint64_t window_ms);

/*
 Lets the push replace the payload of the pending task holding its key.

 When `replace` is true, a `tq_push` under a unique key that a pending
 task holds (ready, delayed, waiting for a retry or for other tasks, but
 not delivered at the moment) gives that task this push's payload and
 returns TQ_MERGED with its id: its next delivery carries the newest
 payload. A task being delivered is never changed (its receipt and the
 payload it was handed stay valid): the push then stores nothing and
 returns TQ_DUPLICATE, as without this option. Needs a unique key;
 refuses tasks to wait for and ordered groups (the push fails with
 TQ_ERR_INVALID_ARGUMENT, storing nothing), and `tq_push_batch` refuses
 it. Combines with `tq_push_options_set_debounce_ms`. Default false.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_replace_pending(struct tq_push_options *options, bool replace);

/*
 Debounces the task held under the push's unique key.

 A `tq_push` under a unique key that a pending task holds (as for
 `tq_push_options_set_replace_pending`) moves that task's run time to
 this push's own (now plus its delay, or its run-at time), but never
 later than `max_ms` after that task was first pushed, and returns
 TQ_MERGED with its id: a burst of pushes runs the task once, a delay
 after the last push, and a steady stream still runs it within `max_ms`
 of the first. The holder keeps its payload unless
 `tq_push_options_set_replace_pending` is set too, and its priority,
 attempts, expiry and deadline. A push that finds no holder stores its
 task as usual. `max_ms` is 1 ms to one year; 0 removes the debounce
 (the default). The same conflicts as replace_pending are refused.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_debounce_ms(struct tq_push_options *options, uint64_t max_ms);

/*
 Makes the task wait for a stored task.

 Makes the task wait for the stored task `id` too (besides those added
 before): it is stored blocked (counted and listed as TQ_STATE_PENDING,
 never pulled) until every task it waits for is done. `id` must name a
 task of the same queue that is stored when the task is pushed: not yet
 finished, or kept as history (a done one does not hold it back);
 otherwise the push fails with TQ_ERR_INVALID_ARGUMENT and stores
 nothing. At most `TQ_MAX_PARENTS` in all, items included.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, an id not
 positive, too many).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_add_after(struct tq_push_options *options, int64_t id);

/*
 Makes an item wait for an earlier item of the same call.

 Makes an item of `tq_push_items` wait for the earlier item at `index`
 of the same call too, as `tq_push_options_add_after` does for a stored
 task, so that a graph of tasks is stored in one call, all or none. Any
 other push with such options fails with TQ_ERR_INVALID_ARGUMENT.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, too many).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_add_after_item(struct tq_push_options *options, size_t index);

/*
 Sets what the task does when a task it waits for fails.

 Sets what the task does when a task it waits for ends dead or
 cancelled: a `tq_parent_failure` value (a plain integer, so any other
 value is an error rather than undefined behaviour). Default
 `TQ_PARENT_FAILURE_CANCEL`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
 the object is then unchanged).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_on_parent_failure(struct tq_push_options *options,
                                                     int32_t policy);

/*
 Files the task under a fairness key.

 Files the task under fairness key `key` (a tenant, say): 1 to
 `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8 (NUL-terminated; copied), or NULL
 for none. Once a queue has a fairness key, its claims share their
 deliveries between the keys with ready tasks in proportion to their
 weights (`tq_set_fair_weight`, default 1), by turns: over any run of
 deliveries in which keys i and j both have ready tasks, their counts
 n_i and n_j satisfy |n_i / w_i - n_j / w_j| <= 1 / w_i + 1 / w_j. A key
 with no ready task gives its turns to the others and banks no credit;
 inside a key, tasks come in the usual order (priority, run time, push).
 Tasks pushed without a key share the empty key "". SQLite only: on
 PostgreSQL a push with a fairness key returns TQ_ERR_INVALID_ARGUMENT
 and stores nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, a key empty,
 too long or not UTF-8; the object is then unchanged).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_fair_key(struct tq_push_options *options, const char *key);

/*
 Puts the task in an ordered group.

 Puts the task in the ordered group `key` of its queue: 1 to
 `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8 (NUL-terminated; copied), or
 NULL to take it out of any group. The tasks of one group are delivered
 at most `max_at_once` at a time (1 to `TQ_MAX_GROUP_AT_ONCE`), in push
 order when it is 1, while other groups proceed in parallel: the task
 waits, as one added by `tq_push_options_add_after` with
 `TQ_PARENT_FAILURE_RUN_ANYWAY` would, for the `max_at_once`-th most
 recent unfinished task of the group, if any (listed by
 `tq_task_waiting_for` while blocked, not by `tq_task_parents`). Tasks of
 one group in one `tq_push_batch` or `tq_push_items` wait for each other
 likewise, in order. A task of the group cancelled while it still waits
 hands its place on: the tasks of the group waiting for it wait for the
 task it waited for.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, a key empty,
 too long or not UTF-8, `max_at_once` out of range; the object is then
 unchanged).
 Thread safety: not with other calls on the same options object.
 */
enum tq_status tq_push_options_set_group(struct tq_push_options *options,
                                         const char *key,
                                         uint32_t max_at_once);

/*
 Pull options: the options object of `tq_pull` and its batch forms
 =================================================================

 Creates the options of a pull.

 Creates an options object for `tq_pull` holding the defaults: a 30,000
 ms lease, no waiting, no cancellation.

 Ownership: the caller owns the result and frees it with
 `tq_pull_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_pull_options *tq_pull_options_new(void);

/*
 Frees pull options.

 Frees an options object from `tq_pull_options_new`. NULL is a no-op;
 call at most once per object.
 */
void tq_pull_options_free(struct tq_pull_options *options);

/*
 Sets the lease.

 Sets the lease of a claimed task, in milliseconds (1 ms to one year):
 past it, the task is ready again for other workers.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_pull_options_set_lease_ms(struct tq_pull_options *options, uint64_t lease_ms);

/*
 Sets how long a pull waits for a task.

 Sets how long `tq_pull` and `tq_pull_batch` wait for a task when none is
 ready, in milliseconds (at most one year; default 0: answer at once).
 A push to the queue ends the wait at once, from this process or another
 (a write that rings nothing, as an outbox push, within about a second),
 a delayed task at its due time. Waiting
 uses no CPU to speak of.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_pull_options_set_wait_ms(struct tq_pull_options *options, uint64_t wait_ms);

/*
 Lets a cancellation object end the pulls' wait.

 Lets `cancel` end the wait of pulls made with these options (NULL
 removes it). The options keep their own reference: `cancel` may be freed
 before them.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, `cancel` not a
 live tq_cancel).
 */
enum tq_status tq_pull_options_set_cancel(struct tq_pull_options *options,
                                          const struct tq_cancel *cancel);

/*
 Cancellation: an object that ends waits from any thread
 =======================================================

 Creates a cancellation object.

 Creates a cancellation object, not yet triggered.

 Ownership: the caller owns the result and frees it with
 `tq_cancel_free`. Returns NULL only if tq failed internally.
 */
struct tq_cancel *tq_cancel_new(void);

/*
 Triggers a cancellation object.

 Ends, with TQ_ERR_INTERRUPTED, the wait of every pull made with options
 holding `cancel` and of every `tq_wait_cancellation` given it, now and
 later: triggering is permanent, so use a new
 object for each operation to cancel. A pull still takes a task that is
 ready.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL or not a live tq_cancel).
 Thread safety: safe from any thread, while pulls use it.
 */
enum tq_status tq_cancel_trigger(struct tq_cancel *cancel);

/*
 Frees a cancellation object.

 Frees a cancellation object from `tq_cancel_new`. NULL is a no-op; call
 at most once per object. Options holding it keep working.
 */
void tq_cancel_free(struct tq_cancel *cancel);

/*
 Schedules: periodic tasks, their options object, and listed schedules
 =====================================================================

 Creates schedule options.

 Creates a schedule options object with no spec yet (set one with
 `tq_schedule_options_set_cron` or `tq_schedule_options_set_every_ms`),
 the time zone UTC, priority 0, the adding handle's max attempts, and
 TQ_CATCH_UP_ONE.

 Ownership: the caller owns the result and frees it with
 `tq_schedule_options_free`. Returns NULL only if tq failed internally.
 Thread safety: as every options object (see `tq_options_new`).
 */
struct tq_schedule_options *tq_schedule_options_new(void);

/*
 Frees schedule options.

 Frees an object from `tq_schedule_options_new`. NULL is a no-op; call
 at most once per object.
 */
void tq_schedule_options_free(struct tq_schedule_options *options);

/*
 Makes the slots those of a cron expression.

 The schedule's slots are those of the cron `expression`: five fields
 (minute, hour, day of month, month, day of week) or six (seconds
 first), or an alias such as "@daily", read in the schedule's time zone.
 Replaces an earlier spec.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or expression,
 bad UTF-8, an expression that does not parse, named in the message; the
 object is then unchanged).
 */
enum tq_status tq_schedule_options_set_cron(struct tq_schedule_options *options,
                                            const char *expression);

/*
 Makes the slots fall at an interval.

 The schedule's slots fall every `interval_ms` milliseconds (1 ms to 366
 days), the first one interval after it is added. Replaces an earlier
 spec.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_schedule_options_set_every_ms(struct tq_schedule_options *options,
                                                uint64_t interval_ms);

/*
 Sets the time zone of the cron expression.

 Reads the cron expression in the IANA time zone `name` (such as
 "Europe/Paris"; default "UTC"). Only a cron schedule takes a zone other
 than UTC: adding an interval with one fails.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, bad
 UTF-8, an unknown zone, named in the message).
 */
enum tq_status tq_schedule_options_set_time_zone(struct tq_schedule_options *options,
                                                 const char *name);

/*
 Sets the priority of the schedule's tasks.

 Sets the priority of the schedule's tasks (higher first; default 0).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
 */
enum tq_status tq_schedule_options_set_priority(struct tq_schedule_options *options,
                                                int32_t priority);

/*
 Sets how many deliveries the schedule's tasks get.

 Sets how many deliveries each of the schedule's tasks gets (at least 1;
 default the adding handle's).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
 */
enum tq_status tq_schedule_options_set_max_attempts(struct tq_schedule_options *options,
                                                    uint32_t max_attempts);

/*
 Sets the catch-up policy.

 Sets the catch-up policy: a `tq_catch_up` value (a plain integer, so any
 other value is an error rather than undefined behaviour), and for
 TQ_CATCH_UP_EACH the most slots run at once, 1 to 10,000 (`limit` is
 ignored for the others).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown
 policy, limit out of range; the object is then unchanged).
 */
enum tq_status tq_schedule_options_set_catch_up(struct tq_schedule_options *options,
                                                int32_t policy,
                                                uint32_t limit);

/*
 Adds a schedule.

 Adds to the handle's queue the schedule `name` (1 to 200 bytes of
 UTF-8) that enqueues `payload` (`len` bytes of UTF-8, a JSON text) at
 every slot of `options`, its first slot after now. Each slot is
 enqueued exactly once however many processes drive the queue's
 schedules (see `tq_run_due_schedules`), as a task with the unique key
 `schedule:<name>:<slot ms>` due at the slot's time.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, name, payload or
 options; options with no spec; a bad name; a name the queue already
 has; a time zone on an interval), TQ_ERR_INVALID_JSON, TQ_ERR_BUSY,
 TQ_ERR_IO. On any error nothing is stored.

 Ownership: tq copies what it keeps; the caller keeps its arguments.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_schedule_add(struct tq_queue *queue,
                               const char *name,
                               const char *payload,
                               size_t len,
                               const struct tq_schedule_options *options);

/*
 Adds or overwrites a schedule.

 As `tq_schedule_add`, but a schedule of the same name is overwritten:
 its next slot is computed afresh from now and it is no longer paused.
 Tasks already enqueued stay, and a slot enqueued before is not enqueued
 again (its unique key stays reserved for a day after its task is done).

 Returns as `tq_schedule_add`, without the error for a taken name.
 Ownership and thread safety: as `tq_schedule_add`.
 */
enum tq_status tq_schedule_replace(struct tq_queue *queue,
                                   const char *name,
                                   const char *payload,
                                   size_t len,
                                   const struct tq_schedule_options *options);

/*
 Adds or updates a schedule, keeping its next slot.

 Declares a schedule, as an application does at every start: as
 `tq_schedule_add`, but a schedule of the same name is updated (payload,
 priority, max attempts, timing) and keeps its next slot while its timing
 (spec, time zone, catch-up) is unchanged, so that a restart neither
 delays an interval's slot nor skips a due slot. A changed timing's next
 slot is computed afresh from now; a paused schedule stays paused.

 Returns as `tq_schedule_add`, without the error for a taken name.
 Ownership and thread safety: as `tq_schedule_add`.
 */
enum tq_status tq_schedule_upsert(struct tq_queue *queue,
                                  const char *name,
                                  const char *payload,
                                  size_t len,
                                  const struct tq_schedule_options *options);

/*
 Removes a schedule.

 Deletes the schedule `name` of the handle's queue; the tasks it
 enqueued stay.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or name, bad
 UTF-8, no such schedule), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_schedule_remove(struct tq_queue *queue, const char *name);

/*
 Pauses a schedule.

 Pauses the schedule `name` of the handle's queue: its slots are skipped
 until `tq_schedule_resume`. Pausing a paused schedule does nothing.

 Returns as `tq_schedule_remove`. Thread safety: may run concurrently
 with any other call.
 */
enum tq_status tq_schedule_pause(struct tq_queue *queue, const char *name);

/*
 Resumes a schedule.

 Resumes the schedule `name` of the handle's queue: it goes on from its
 first slot at or after now (slots that fell while it was paused are
 skipped, whatever its catch-up policy).

 Returns as `tq_schedule_remove`. Thread safety: may run concurrently
 with any other call.
 */
enum tq_status tq_schedule_resume(struct tq_queue *queue, const char *name);

/*
 Enqueues the tasks of the due slots.

 Enqueues the task of every due slot of the handle's queue's schedules
 (by each one's catch-up policy) and writes how many tasks it stored to
 `*out_enqueued` when it is not NULL. Any number of handles, processes
 and machines may call it at once: each slot is enqueued once, in the
 transaction that moves its schedule on. `tq_pull` and `tq_pull_batch`
 call it by themselves when a slot is due (and a waiting pull wakes at
 the next slot), so a worker needs no other scheduler.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_run_due_schedules(struct tq_queue *queue, int64_t *out_enqueued);

/*
 Lists a page of the queue's schedules.

 Lists the handle's queue's schedules by name: up to `max` of them with
 names after `after_name` (NULL or "" to start), stored in
 `out_schedules[0..*out_count]` (the rest set to NULL). Pass the last
 name of a page to get the next; a page shorter than `max` is the last.

 Returns TQ_OK (`*out_count` may be 0), or TQ_ERR_INVALID_ARGUMENT (NULL
 queue, out_schedules or out_count; bad UTF-8), TQ_ERR_BUSY, TQ_ERR_IO.

 Ownership: the caller owns each schedule and frees it with
 `tq_schedule_free`. Thread safety: may run concurrently with any other
 call.
 */
enum tq_status tq_schedules(const struct tq_queue *queue,
                            const char *after_name,
                            size_t max,
                            struct tq_schedule **out_schedules,
                            size_t *out_count);

/*
 Frees a listed schedule.

 Frees a schedule from `tq_schedules`. NULL is a no-op; call at most
 once per schedule.
 */
void tq_schedule_free(struct tq_schedule *schedule);

/*
 The schedule's name.

 Returns the schedule's name, or NULL when `schedule` is NULL.

 Ownership: the text belongs to the schedule and lives until
 `tq_schedule_free`. Thread safety: safe on a schedule read by several
 threads.
 */
const char *tq_schedule_name(const struct tq_schedule *schedule);

/*
 The schedule's cron expression.

 Returns the schedule's cron expression, or NULL for an interval (see
 `tq_schedule_every_ms`) or when `schedule` is NULL.

 Ownership and thread safety: as `tq_schedule_name`.
 */
const char *tq_schedule_cron(const struct tq_schedule *schedule);

/*
 The schedule's interval.

 Returns the schedule's interval in milliseconds, or 0 for a cron
 schedule or when `schedule` is NULL. Thread safety: safe on a schedule
 read by several threads.
 */
uint64_t tq_schedule_every_ms(const struct tq_schedule *schedule);

/*
 The time zone of the schedule's cron expression.

 Returns the IANA name of the time zone the schedule's cron expression
 is read in, or NULL when `schedule` is NULL.

 Ownership and thread safety: as `tq_schedule_name`.
 */
const char *tq_schedule_time_zone(const struct tq_schedule *schedule);

/*
 The payload of the schedule's tasks.

 Returns the payload of the schedule's tasks, NUL-terminated, and stores
 its length (without the NUL) in `*len` when `len` is not NULL; NULL
 (and length 0) when `schedule` is NULL.

 Ownership and thread safety: as `tq_schedule_name`.
 */
const char *tq_schedule_payload(const struct tq_schedule *schedule, size_t *len);

/*
 The priority of the schedule's tasks.

 Returns the priority of the schedule's tasks, or 0 when `schedule` is
 NULL. Thread safety: safe on a schedule read by several threads.
 */
int32_t tq_schedule_priority(const struct tq_schedule *schedule);

/*
 How many deliveries the schedule's tasks get.

 Returns the max attempts of the schedule's tasks, or 0 when `schedule`
 is NULL. Thread safety: safe on a schedule read by several threads.
 */
uint32_t tq_schedule_max_attempts(const struct tq_schedule *schedule);

/*
 The schedule's catch-up policy.

 Returns the schedule's catch-up policy (a `tq_catch_up` value), or -1
 when `schedule` is NULL; with TQ_CATCH_UP_EACH, `*out_limit` (when not
 NULL) gets its bound, else 1. Thread safety: safe on a schedule read by
 several threads.
 */
int32_t tq_schedule_catch_up(const struct tq_schedule *schedule, uint32_t *out_limit);

/*
 Whether the schedule is paused.

 Returns whether the schedule is paused (false when `schedule` is NULL).
 Thread safety: safe on a schedule read by several threads.
 */
bool tq_schedule_paused(const struct tq_schedule *schedule);

/*
 The schedule's next slot.

 Returns the schedule's next slot not yet enqueued, in milliseconds since
 the Unix epoch (on PostgreSQL, on the server's clock), or 0 when
 `schedule` is NULL. Thread safety: safe on a schedule read by several
 threads.
 */
int64_t tq_schedule_next_slot_unix_ms(const struct tq_schedule *schedule);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* TQ_H */
