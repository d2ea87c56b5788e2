'use strict';
// What every file of the binding shares: the statuses a C call returns,
// check() and its asynchronous forms, which throw for the negative ones,
// and callAsync, which runs a C call on one of libuv's worker threads; the
// ranges of the C integer types; how long to wait before trying again.

const { lib } = require('./native');
const errors = require('./errors');

const OK = 0;
const EMPTY = 1;
const DUPLICATE = 2;
const MERGED = 3;
const SUSPENDED = 4;
const TIMEOUT = 5;
const INTERRUPTED = errors.InterruptedError.status;
const NOT_HELD = errors.NotHeldError.status;
const CANCELLED = errors.CancelledError.status;
const BUSY = errors.BusyError.status;
const IO = errors.IoError.status;

const UINT32_MAX = 2 ** 32 - 1;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const UINT64_MAX = 2n ** 64n - 1n;

/** The wait for changes that cannot look for now (BUSY: the file's write
 * lock held past the busy timeout; IO: on PostgreSQL, a connection cut or
 * a server restarting) tries again after these waits, doubling: what it
 * waits for is still to come. */
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2_000;

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

module.exports = {
  BUSY,
  CANCELLED,
  DUPLICATE,
  EMPTY,
  FIRST_RETRY_MS,
  INT32_MAX,
  INT32_MIN,
  MERGED,
  SUSPENDED,
  TIMEOUT,
  INTERRUPTED,
  IO,
  MAX_RETRY_MS,
  NOT_HELD,
  OK,
  UINT32_MAX,
  UINT64_MAX,
  asyncError,
  callAsync,
  check,
  checkAsync,
};
