/*
 * tq: a persistent task queue in one SQLite file.
 *
 * tq_push stores a JSON task; tq_pull atomically claims the oldest ready one
 * under a lease; tq_finish completes it; tq_recover brings back the tasks of
 * crashed workers without touching those of live ones.
 *
 * Errors. Every fallible call returns a tq_status: TQ_OK (0) on success, a
 * positive value for a non-error outcome (TQ_EMPTY), a negative value for an
 * error. After an error, tq_last_error() gives a message for the calling
 * thread; it is owned by tq and valid until the thread's next tq call.
 * A failed call changes nothing, except that a write failing with
 * TQ_ERR_IO while it commits may still have reached the disk (once).
 *
 * Ownership. What tq allocates, tq frees: tq_open's handle with tq_close,
 * tq_pull's task with tq_task_free, each options object with its _free.
 * Every _free and tq_close accepts NULL and must be called at most once per
 * object. A borrowed result (tq_task_payload) lives exactly as long as its
 * parent. Strings tq returns from tq_status_str and tq_version are static.
 * tq records the objects it hands out: a pointer already freed or closed,
 * or an object of the wrong type, is refused with TQ_ERR_INVALID_ARGUMENT
 * (a second free is ignored, with a message) without being read, unless
 * the address has since been reused for a new object of the same type.
 *
 * Threads. One tq_queue may be used from any number of threads at once;
 * calls on it are ordered inside tq. A tq_task may be read by several
 * threads, but freed by one. An options object is read only during the call
 * it is passed to; do not set it while another thread passes it to a call.
 *
 * Processes. Any number of processes on one host may open the same file
 * (it must be on a local filesystem: WAL mode needs shared memory). A handle
 * belongs to the process that opened it: in a child after fork() every call
 * on it fails with TQ_ERR_INVALID_ARGUMENT; open a new handle there. Do not
 * open tq's file with another copy of SQLite in the same process: closing
 * that copy's descriptors would drop tq's locks.
 *
 * Options. Options are opaque objects with a _new, one setter per option
 * and a _free; passing NULL instead of an options object means the
 * defaults. Setters check their value and return TQ_ERR_INVALID_ARGUMENT for
 * one out of range.
 *
 * Durability. TQ_DURABILITY_FULL (the default): a call returns once its
 * write is flushed to disk, so it survives power loss; one flush per commit.
 * TQ_DURABILITY_NORMAL: survives a process crash, may lose the last commits
 * on power loss or OS crash; several times faster.
 *
 * Versions. TQ_VERSION_* describe this header; tq_version() and
 * tq_version_number() describe the library loaded at run time.
 */


#ifndef TQ_H
#define TQ_H

/* Generated from the Rust sources by cbindgen: do not edit by hand.
   Regenerate with `TQ_BLESS=1 cargo test --test header`. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TQ_VERSION "0.1.0"
#define TQ_VERSION_MAJOR 0
#define TQ_VERSION_MINOR 1
#define TQ_VERSION_PATCH 0
#define TQ_VERSION_NUMBER 100

/*
 The largest payload any queue accepts, in bytes (SQLite's limit on one
 value); [`OpenOptions::max_payload_len`] sets a queue's own limit.
 */
#define TQ_MAX_PAYLOAD_LEN 1000000000

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
   `tq_pull` found no ready task. Not an error.
   */
  TQ_EMPTY = 1,
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
} tq_status;

/*
 Values for `tq_options_set_durability`.
 */
typedef enum tq_durability {
  /*
   The default. A call returns only once its write is flushed to the
   disk: it survives a process crash and a power loss. One flush per
   commit (about 10,000 commits/s on a fast SSD).
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
 Values for `tq_count`.
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
} tq_state;

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
 A handle on one queue file. Thread-safe: one handle may be used from any
 number of threads at once.
 */
typedef struct tq_queue tq_queue;

/*
 One delivery of one task, owned by the caller of `tq_pull`. Reading it
 from several threads at once is safe; freeing it is not.
 */
typedef struct tq_task tq_task;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Returns the message of the last failed call on the calling thread, or
 `""` when no call on this thread has failed. Never NULL.

 Ownership: the string belongs to tq and stays valid until the next tq
 call on the same thread. Thread safety: each thread has its own message.
 */
const char *tq_last_error(void);

/*
 Returns a static, human-readable description of `status` (any integer;
 values tq does not know get `"unknown status"`). Never NULL.

 Thread safety: may be called from any thread.
 */
const char *tq_status_str(int32_t status);

/*
 Returns the library's version as "MAJOR.MINOR.PATCH", a static string.
 Compare with the header's `TQ_VERSION` to detect a mismatch.

 Thread safety: may be called from any thread.
 */
const char *tq_version(void);

/*
 Returns the library's version as MAJOR * 10000 + MINOR * 100 + PATCH,
 the same encoding as the header's `TQ_VERSION_NUMBER`.

 Thread safety: may be called from any thread.
 */
uint32_t tq_version_number(void);

/*
 Creates an options object for `tq_open` holding the defaults: durability
 `TQ_DURABILITY_FULL`, a 5,000 ms busy timeout, no history, payloads up
 to `TQ_MAX_PAYLOAD_LEN` bytes.

 Ownership: the caller owns the result and frees it with
 `tq_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_options *tq_options_new(void);

/*
 Frees an options object from `tq_options_new`. NULL is a no-op; call at
 most once per object.
 */
void tq_options_free(struct tq_options *options);

/*
 Sets the durability: `TQ_DURABILITY_FULL` or `TQ_DURABILITY_NORMAL` (a
 plain integer, so any other value is an error rather than undefined
 behaviour).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
 the object is then unchanged).
 */
enum tq_status tq_options_set_durability(struct tq_options *options, int32_t durability);

/*
 Sets how long a call waits for other writers on the file before it
 fails with TQ_ERR_BUSY, in milliseconds (0 fails at once; at most one
 year). Default 5,000.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_busy_timeout_ms(struct tq_options *options, uint64_t timeout_ms);

/*
 When `keep` is true, tasks finished through this handle are kept as
 done with their finish time (`tq_count`, `tq_purge_done`); when false
 (the default) they are deleted.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
 */
enum tq_status tq_options_set_keep_history(struct tq_options *options, bool keep);

/*
 Sets the largest payload a handle opened with these options pushes, in
 bytes: 1 to `TQ_MAX_PAYLOAD_LEN` (the default). A larger push fails with
 TQ_ERR_INVALID_ARGUMENT and stores nothing.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_options_set_max_payload_len(struct tq_options *options, size_t limit);

/*
 Creates an options object for `tq_push` holding the defaults: the task
 is ready at once.

 Ownership: the caller owns the result and frees it with
 `tq_push_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_push_options *tq_push_options_new(void);

/*
 Frees an options object from `tq_push_options_new`. NULL is a no-op;
 call at most once per object.
 */
void tq_push_options_free(struct tq_push_options *options);

/*
 The task becomes ready `delay_ms` milliseconds after the push (at most
 one year). Replaces an earlier `tq_push_options_set_run_at_unix_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_push_options_set_delay_ms(struct tq_push_options *options, uint64_t delay_ms);

/*
 The task becomes ready at `unix_ms`, milliseconds since the Unix epoch
 (a time in the past means at once). Replaces an earlier
 `tq_push_options_set_delay_ms`.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
 */
enum tq_status tq_push_options_set_run_at_unix_ms(struct tq_push_options *options, int64_t unix_ms);

/*
 Creates an options object for `tq_pull` holding the defaults: a 30,000
 ms lease.

 Ownership: the caller owns the result and frees it with
 `tq_pull_options_free`. Returns NULL only if tq failed internally.
 */
struct tq_pull_options *tq_pull_options_new(void);

/*
 Frees an options object from `tq_pull_options_new`. NULL is a no-op;
 call at most once per object.
 */
void tq_pull_options_free(struct tq_pull_options *options);

/*
 Sets the lease of a claimed task, in milliseconds (1 ms to one year):
 past it, the task is ready again for other workers.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
 */
enum tq_status tq_pull_options_set_lease_ms(struct tq_pull_options *options, uint64_t lease_ms);

/*
 Opens the queue in the SQLite file at `path` (UTF-8), creating the file
 and tq's `tq_*` tables as needed, and stores the handle in `*out`.
 `options` may be NULL for the defaults; it is only read during the call.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL, empty or non-UTF-8
 path, NULL out), TQ_ERR_NOT_A_DATABASE (not SQLite, corrupt, or a newer
 tq schema; the file is left untouched), TQ_ERR_IO (cannot open or
 create), TQ_ERR_BUSY. On error `*out` is set to NULL.

 Ownership: the caller owns the handle and frees it with `tq_close`.
 Thread safety: may be called from any thread; the handle may then be
 used from any number of threads at once, in the process that opened it.
 */
enum tq_status tq_open(const char *path, const struct tq_options *options, struct tq_queue **out);

/*
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
 Stores the JSON text `payload[0..len]` (UTF-8, no terminator needed) as
 a new pending task, exactly as given, and writes its id to `*out_id`
 when `out_id` is not NULL. `options` may be NULL for the defaults.
 Returns once the task is stored at the handle's durability.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or payload, bad
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
 Claims the oldest ready task under a lease and stores it in `*out`: a
 pending task that is due, or one whose lease expired. Its attempt count
 goes up by one. No two holders ever hold the same task at once.
 `options` may be NULL for the defaults (a 30 s lease).

 Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when no task is
 ready, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY,
 TQ_ERR_IO, TQ_ERR_NOT_A_DATABASE (the stored task is damaged).

 Ownership: the caller owns `*out` and frees it with `tq_task_free`.
 Thread safety: any number of threads may pull on one handle at once.
 */
enum tq_status tq_pull(struct tq_queue *queue,
                       const struct tq_pull_options *options,
                       struct tq_task **out);

/*
 Returns the task's id (as returned by `tq_push`), or 0 when `task` is
 NULL. Thread safety: safe on a task read by several threads.
 */
int64_t tq_task_id(const struct tq_task *task);

/*
 Returns the task's payload, the JSON text exactly as pushed, followed by
 a NUL byte, and stores its length (without the NUL) in `*len` when `len`
 is not NULL. Returns NULL (and length 0) when `task` is NULL.

 Ownership: the text belongs to the task and lives until `tq_task_free`.
 Thread safety: safe on a task read by several threads.
 */
const char *tq_task_payload(const struct tq_task *task, size_t *len);

/*
 Returns how many times the task has been claimed, this delivery
 included: 1 on the first delivery. Returns 0 when `task` is NULL.
 Thread safety: safe on a task read by several threads.
 */
uint32_t tq_task_attempts(const struct tq_task *task);

/*
 Frees a task from `tq_pull`. NULL is a no-op; call at most once per
 task. Freeing does not finish the task: an unfinished task becomes
 ready again when its lease expires or its holder is recovered.
 */
void tq_task_free(struct tq_task *task);

/*
 Completes this delivery of `task`: the task is deleted (or kept as done
 on a handle opened with history). Succeeds as long as nobody else has
 taken the task since it was pulled, even past its lease. The task may
 have been pulled through another handle on the same file; it still must
 be freed with `tq_task_free`.

 Returns TQ_OK, or TQ_ERR_NOT_HELD (already finished, or the lease was
 recovered or taken by another worker: nothing changes),
 TQ_ERR_INVALID_ARGUMENT (NULL queue or task), TQ_ERR_BUSY, TQ_ERR_IO.

 Thread safety: any number of threads may finish on one handle at once.
 */
enum tq_status tq_finish(struct tq_queue *queue, const struct tq_task *task);

/*
 Returns to pending every leased task whose lease expired or whose holder
 process no longer exists on this machine, and writes how many to
 `*out_recovered` when it is not NULL. Tasks held by live processes, this
 one included, are untouched: safe to call at every start-up.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
 TQ_ERR_IO. Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_recover(struct tq_queue *queue, int64_t *out_recovered);

/*
 Writes to `*out_count` how many tasks are in `state` (a `tq_state`
 value, passed as a plain integer).

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_count,
 unknown state), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_count(const struct tq_queue *queue, int32_t state, int64_t *out_count);

/*
 Deletes the done tasks finished at least `older_than_ms` milliseconds
 ago (0: all of them) and writes how many to `*out_purged` when it is not
 NULL.

 Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, age over
 INT64_MAX), TQ_ERR_BUSY, TQ_ERR_IO.
 Thread safety: may run concurrently with any other call.
 */
enum tq_status tq_purge_done(struct tq_queue *queue, uint64_t older_than_ms, int64_t *out_purged);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* TQ_H */
