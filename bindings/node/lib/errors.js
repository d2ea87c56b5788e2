'use strict';
// tq's errors: TqError and one subclass per negative tq_status.
//
// The message of an error raised for a failed synchronous C call is the
// library's own (tq_last_error(), read on the main thread right after the
// call). A waiting pull runs on a worker thread of libuv, where the
// library keeps that call's message; it is never read from another thread,
// so such an error carries the status's description (tq_status_str)
// instead, and says so.

/** A tq call failed. `status` is the C status (a negative number). */
class TqError extends Error {
  constructor(message, status) {
    super(message);
    this.name = new.target.name;
    this.status = status ?? new.target.status ?? 0;
  }
}

/** TQ_ERR_INVALID_ARGUMENT: a bad argument or option value, a payload that
 * is not UTF-8 or over the queue's limit. */
class InvalidArgumentError extends TqError {
  static status = -1;
}

/** A Queue used after close(), or a Task after close(). The library answers
 * TQ_ERR_INVALID_ARGUMENT for a closed handle; the binding refuses such a
 * call before it reaches the library. A pull waiting when its queue is
 * closed rejects with it too. */
class ClosedError extends InvalidArgumentError {}

/** TQ_ERR_INVALID_JSON: the payload is not one JSON text; nothing was stored. */
class InvalidJsonError extends TqError {
  static status = -2;
}

/** TQ_ERR_NOT_HELD: this delivery is no longer current: the task was already
 * finished or failed, or its lease was recovered or taken by another worker. */
class NotHeldError extends TqError {
  static status = -3;
}

/** TQ_ERR_BUSY: the file stayed locked by other writers past the busy
 * timeout; nothing was done and the call may be tried again. */
class BusyError extends TqError {
  static status = -4;
}

/** TQ_ERR_IO: the operating system refused (missing directory, permissions,
 * disk full, an I/O error). A write that fails this way may or may not have
 * reached the disk. */
class IoError extends TqError {
  static status = -5;
}

/** TQ_ERR_NOT_A_DATABASE: the file is not SQLite, is corrupt, or has a newer
 * tq schema; it was left untouched. */
class NotADatabaseError extends TqError {
  static status = -6;
}

/** TQ_ERR_INTERNAL: a bug in tq. The queue remains usable. */
class InternalError extends TqError {
  static status = -7;
}

/** TQ_ERR_INTERRUPTED: a pull's wait was ended by Queue.interrupt(); no task
 * was claimed. (A pull ended by its AbortSignal rejects with the signal's
 * reason instead, as Node's own APIs do.) */
class InterruptedError extends TqError {
  static status = -8;
}

/** TQ_ERR_UNKNOWN_OUTCOME: the write may or may not last. On an SQLite file
 * at full durability, flushing the committed write failed; on PostgreSQL,
 * the connection was lost while the write was being committed. */
class UnknownOutcomeError extends TqError {
  static status = -9;
}

/** TQ_ERR_CANCELLED: the task was cancelled (Queue.cancelTask) while this
 * delivery held it: the delivery is over, the task ends as cancelled and is
 * never delivered again. Stop working on it. */
class CancelledError extends TqError {
  static status = -10;
}

/** TQ_ERR_FULL: the push would take the queue's pending tasks over its cap
 * (Queue.setMaxPending), and no room came within its `waitForRoom`. Nothing
 * was stored (of a batch, no task): push again later. */
class FullError extends TqError {
  static status = -11;
}

/** Not an error: Task.waitFor or Task.sleep handed the task back to wait
 * (TQ_SUSPENDED): its delivery is over, no attempt was spent and its
 * steps are kept. Let it leave the handler: Queue.work then neither
 * finishes nor fails the task, and its next delivery runs the handler
 * again, where the same call resolves. */
class SuspendedError extends Error {
  name = 'SuspendedError';
}

/** Task.waitFor's wait timed out before an event came (TQ_TIMEOUT), at
 * this delivery or an earlier one. The task is still held. */
class EventTimeoutError extends Error {
  name = 'EventTimeoutError';
}

/** The error class for each negative status. */
const BY_STATUS = new Map(
  [
    InvalidArgumentError,
    InvalidJsonError,
    NotHeldError,
    BusyError,
    IoError,
    NotADatabaseError,
    InternalError,
    InterruptedError,
    UnknownOutcomeError,
    CancelledError,
    FullError,
  ].map((cls) => [cls.status, cls]),
);

/** The error for a negative status; a status this package does not know
 * (from a newer library) gives a plain TqError carrying it. */
function fromStatus(status, message) {
  const cls = BY_STATUS.get(status);
  return cls ? new cls(message) : new TqError(message, status);
}

module.exports = {
  SuspendedError,
  BY_STATUS,
  BusyError,
  CancelledError,
  ClosedError,
  EventTimeoutError,
  FullError,
  InternalError,
  InterruptedError,
  InvalidArgumentError,
  InvalidJsonError,
  IoError,
  NotADatabaseError,
  NotHeldError,
  TqError,
  UnknownOutcomeError,
  fromStatus,
};
