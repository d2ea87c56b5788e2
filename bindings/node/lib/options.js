'use strict';
// Arguments into C values: the checks and conversions of durations,
// integers, strings, JSON and signals; the options objects (tq_options,
// tq_push_options, tq_pull_options) built from them; Durability and
// ParentFailure.

const { lib } = require('./native');
const errors = require('./errors');
const { INT32_MAX, INT32_MIN, UINT32_MAX, UINT64_MAX, check } = require('./limits');

/** Values for `durability`: how far a write must reach before a call returns. */
const Durability = Object.freeze({ FULL: 0, NORMAL: 1 });
/** Values for `onParentFailure`: what a task does when a task it waits for
 * ends dead or cancelled. */
const ParentFailure = Object.freeze({ CANCEL: 0, RUN_ANYWAY: 1 });

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

/** A time given as a Date or milliseconds since the epoch, as whole ms. */
function unixMs(name, value) {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    throw new errors.InvalidArgumentError(`${name} must be a Date or milliseconds since the epoch, not ${value}`);
  }
  return Math.round(ms);
}

/** The setters and values of a push's expiry and deadline, each given
 * after the push (ms) or at a time, not both. */
function limitSettings({ expireAfter, expireAt, deadlineAfter, deadlineAt }) {
  const settings = [];
  for (const [afterName, after, atName, at, afterSetter, atSetter] of [
    ['expireAfter', expireAfter, 'expireAt', expireAt,
      lib.tq_push_options_set_expire_after_ms, lib.tq_push_options_set_expire_at_unix_ms],
    ['deadlineAfter', deadlineAfter, 'deadlineAt', deadlineAt,
      lib.tq_push_options_set_deadline_after_ms, lib.tq_push_options_set_deadline_unix_ms],
  ]) {
    if (after !== undefined && at !== undefined) {
      throw new errors.InvalidArgumentError(`give ${afterName} or ${atName}, not both`);
    }
    if (after !== undefined) {
      settings.push([afterSetter, milliseconds(afterName, after)]);
    }
    if (at !== undefined) {
      settings.push([atSetter, unixMs(atName, at)]);
    }
  }
  return settings;
}

/** The setters of `options`' merge into the pending holder of the key:
 * replacePending and debounce (the longest, in milliseconds). */
function mergeSettings({ replacePending, debounce }) {
  const settings = [];
  if (replacePending !== undefined) {
    if (typeof replacePending !== 'boolean') {
      throw new TypeError(`replacePending must be a boolean, not ${describe(replacePending)}`);
    }
    settings.push([lib.tq_push_options_set_replace_pending, replacePending]);
  }
  if (debounce !== undefined) {
    const longest = milliseconds('debounce', debounce);
    if (longest === 0) {
      throw new errors.InvalidArgumentError('the longest debounce must be positive');
    }
    settings.push([lib.tq_push_options_set_debounce_ms, longest]);
  }
  return settings;
}

/** The push options' setters and values for `options` of the method `call`
 * (pushMany takes no unique key). */
function pushSettings(call, options) {
  const allowUnique = call !== 'pushMany';
  const { delay, runAt, priority, maxAttempts, uniqueKey, uniqueFor, after, afterItems, onParentFailure, group, groupMax, waitForRoom, fairKey } =
    callOptions(call, options);
  const settings = limitSettings(options);
  settings.push(...mergeSettings(options));
  if (fairKey !== undefined) {
    settings.push([lib.tq_push_options_set_fair_key, cString('fairKey', fairKey)]);
  }
  if (waitForRoom !== undefined) {
    settings.push([lib.tq_push_options_set_wait_for_room_ms, milliseconds('waitForRoom', waitForRoom)]);
  }
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
    settings.push([lib.tq_push_options_set_run_at_unix_ms, unixMs('runAt', runAt)]);
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

module.exports = {
  Durability,
  ParentFailure,
  buildOptions,
  cString,
  callOptions,
  checkSignal,
  describe,
  encode,
  enumValue,
  integer,
  jsonText,
  lengths,
  milliseconds,
  openSettings,
  payloadPointer,
  pullOptions,
  pushOptions,
  pushSettings,
  reasonText,
  unixMs,
  redacted,
  withIndex,
};
