'use strict';
// Every error path: each is an Error subclass with the status and the
// library's message, and changes nothing.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { queuePath, tempDir, tq, withQueue } = require('./helpers');
const errors = require('../lib/errors');

/** Asserts that `fn` throws an error of `cls` with `status` and a message matching `message`. */
/** The message of a library error raised on a worker thread: the call and
 * the status's description (the library's own message stays on that thread). */
const ON_WORKER = /^tq_\w+: /;

async function rejectsTq(fn, cls, message) {
  await assert.rejects(fn, (error) => {
    assert.ok(error instanceof cls, `${error.name}: ${error.message}`);
    assert.ok(error instanceof tq.TqError && error instanceof Error);
    assert.equal(error.status, cls.status ?? -1);
    assert.match(error.message, message);
    return true;
  });
}

test('each negative status has its class, named after the header', () => {
  assert.deepEqual(
    [...errors.BY_STATUS].map(([status, cls]) => [status, cls.name]),
    [
      [-1, 'InvalidArgumentError'],
      [-2, 'InvalidJsonError'],
      [-3, 'NotHeldError'],
      [-4, 'BusyError'],
      [-5, 'IoError'],
      [-6, 'NotADatabaseError'],
      [-7, 'InternalError'],
      [-8, 'InterruptedError'],
      [-9, 'UnknownOutcomeError'],
      [-10, 'CancelledError'],
      [-11, 'FullError'],
    ],
  );
  const unknown = errors.fromStatus(-99, 'from a newer library');
  assert.equal(unknown.constructor, tq.TqError);
  assert.equal(unknown.status, -99);
  assert.ok(new tq.ClosedError('x') instanceof tq.InvalidArgumentError);
  assert.equal(new tq.ClosedError('x').status, -1);
});

test('payloads the library refuses store nothing', () =>
  withQueue(
    async (queue) => {
      await rejectsTq(() => queue.push('not json'), tq.InvalidJsonError, ON_WORKER);
      await rejectsTq(() => queue.push(Buffer.from([0x22, 0xff, 0x22])), tq.InvalidArgumentError, ON_WORKER);
      await rejectsTq(() => queue.push('"' + 'x'.repeat(20) + '"'), tq.InvalidArgumentError, ON_WORKER);
      await rejectsTq(() => queue.push(''), tq.InvalidJsonError, ON_WORKER);
      await rejectsTq(() => queue.push(Buffer.alloc(0)), tq.InvalidJsonError, ON_WORKER);
      await rejectsTq(() => queue.push('"\ud800"'), tq.InvalidArgumentError, /lone surrogate/);
      await rejectsTq(() => queue.push(1, { uniqueKey: 'k\udc00' }), tq.InvalidArgumentError, /uniqueKey .* lone surrogate/);
      await rejectsTq(() => queue.pushMany(['1', '']), tq.InvalidJsonError, /payload 1/);
      await assert.rejects(async () => queue.push(undefined), TypeError);
      await assert.rejects(async () => queue.push(() => 1), TypeError);
      await assert.rejects(async () => queue.push({ big: 1n }), TypeError);
      assert.equal(await queue.count(), 0);
    },
    { maxPayloadLen: 16 },
  ));

test('a batch with a bad payload stores none and names its index', () =>
  withQueue(async (queue) => {
    await assert.rejects(
      () => queue.pushMany(['1', '2', '{nope']),
      (error) => error instanceof tq.InvalidJsonError && error.index === 2 && /payload 2/.test(error.message),
    );
    await assert.rejects(
      () => queue.pushMany([1, undefined]),
      (error) => error instanceof TypeError && error.index === 1 && /^payload 1: /.test(error.message),
    );
    await rejectsTq(() => queue.pushMany([1], { uniqueKey: 'k' }), tq.InvalidArgumentError, /unique key/);
    assert.equal(await queue.count(), 0);
  }));

test('option values out of range or of the wrong type are refused', async () => {
  const file = queuePath();
  await rejectsTq(() => tq.open(file, { durability: 'eventual' }), tq.InvalidArgumentError, /unknown durability "eventual"; expected one of full, normal/);
  await rejectsTq(() => tq.open(file, { durability: 7 }), tq.InvalidArgumentError, /durability/);
  await rejectsTq(() => tq.open(file, { queue: '' }), tq.InvalidArgumentError, /queue/);
  await rejectsTq(() => tq.open(file, { queue: 'x'.repeat(tq.MAX_QUEUE_NAME_LEN + 1) }), tq.InvalidArgumentError, /queue/);
  await rejectsTq(() => tq.open(file, { queue: 'a\0b' }), tq.InvalidArgumentError, /NUL/);
  await rejectsTq(() => tq.open(file, { maxAttempts: 0 }), tq.InvalidArgumentError, /attempts/);
  await rejectsTq(() => tq.open(file, { maxAttempts: -1 }), tq.InvalidArgumentError, /maxAttempts must be between/);
  await rejectsTq(() => tq.open(file, { busyTimeout: -5 }), tq.InvalidArgumentError, /busyTimeout must be at least 0/);
  await rejectsTq(() => tq.open(file, { busyTimeout: Infinity }), tq.InvalidArgumentError, /busy timeout/);
  await rejectsTq(() => tq.open(file, { retryBackoff: { min: 10, max: 1 } }), tq.InvalidArgumentError, /back-?off|retry/i);
  await rejectsTq(() => tq.open(file, { maxPayloadLen: 0 }), tq.InvalidArgumentError, /payload/);
  await assert.rejects(async () => tq.open(file, { busyTimeout: '5' }), TypeError);
  await assert.rejects(async () => tq.open(file, { retryBackoff: { min: 1 } }), TypeError);
  await assert.rejects(async () => tq.open(42), TypeError);
  await assert.rejects(async () => tq.open(file, null), TypeError);
  await rejectsTq(() => tq.open('a\0b'), tq.InvalidArgumentError, /NUL character \(at 1\)/);
  await rejectsTq(() => tq.open(''), tq.InvalidArgumentError, /^tq_open of "": /);
  assert.equal(fs.existsSync(file), false);

  await withQueue(async (queue) => {
    await rejectsTq(() => queue.push(1, { delay: 1, runAt: 1 }), tq.InvalidArgumentError, /delay or runAt/);
    await rejectsTq(() => queue.push(1, { delay: 400 * 86_400_000 }), tq.InvalidArgumentError, /delay/);
    await rejectsTq(() => queue.push(1, { runAt: -1 }), tq.InvalidArgumentError, /time/);
    await rejectsTq(() => queue.push(1, { runAt: new Date(NaN) }), tq.InvalidArgumentError, /runAt must be a Date/);
    await rejectsTq(() => queue.push(1, { priority: 2 ** 31 }), tq.InvalidArgumentError, /priority must be between/);
    await rejectsTq(() => queue.push(1, { priority: 1.5 }), tq.InvalidArgumentError, /priority must be an integer/);
    await rejectsTq(() => queue.push(1, { maxAttempts: 0 }), tq.InvalidArgumentError, /attempts/);
    await rejectsTq(() => queue.push(1, { uniqueKey: '' }), tq.InvalidArgumentError, /key/);
    await rejectsTq(() => queue.push(1, { uniqueKey: 'k'.repeat(tq.MAX_UNIQUE_KEY_LEN + 1) }), tq.InvalidArgumentError, /key/);
    await rejectsTq(() => queue.push(1, { uniqueFor: 10 }), tq.InvalidArgumentError, /key/);
    await assert.rejects(async () => queue.pushUnique(1, 7), TypeError);
    assert.equal(await queue.count(), 0);

    await assert.rejects(queue.pull({ lease: 0 }), tq.InvalidArgumentError);
    await assert.rejects(queue.pull({ wait: -1 }), /wait must be at least 0/);
    await assert.rejects(queue.pull({ wait: 'soon' }), TypeError);
    await assert.rejects(queue.pull({ signal: {} }), TypeError);
    await assert.rejects(queue.pullMany(0), /n must be between/);
    await rejectsTq(() => queue.count('sleeping'), tq.InvalidArgumentError, /unknown state/);
    await rejectsTq(() => queue.count(9), tq.InvalidArgumentError, ON_WORKER);
    await rejectsTq(() => queue.purge({ state: 'pending' }), tq.InvalidArgumentError, ON_WORKER);
    await rejectsTq(() => queue.retryDead(12345), tq.InvalidArgumentError, ON_WORKER);
    await rejectsTq(() => queue.list('pending', { limit: -1 }), tq.InvalidArgumentError, /limit/);
    await assert.rejects(async () => queue.finishMany([{}]), TypeError);

    await queue.push(1);
    const task = await queue.pull();
    await rejectsTq(() => task.extend(0), tq.InvalidArgumentError, ON_WORKER);
    await assert.rejects(async () => task.fail(42), TypeError);
    assert.equal(task.closed, false, 'a refused call leaves the delivery held');
    await task.finish();
  });
});

test('a delivery no longer held: finish, fail, extend and finishAndPull say so', () =>
  withQueue(async (queue) => {
    await queue.push(1);
    const task = await queue.pull();
    await task.finish();
    await rejectsTq(() => task.finish(), tq.NotHeldError, /task \d+ was already finished/);
    await rejectsTq(() => task.fail('x'), tq.NotHeldError, /already finished/);
    await rejectsTq(() => task.extend(10), tq.NotHeldError, /already finished/);
    await rejectsTq(() => task.finishAndPull(), tq.NotHeldError, /already finished/);
    assert.deepEqual(await queue.finishMany([task]), [false]);

    await queue.push(2);
    const leased = await queue.pull({ lease: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const taken = await queue.pull();
    await rejectsTq(() => leased.finish(), tq.NotHeldError, new RegExp(`task ${leased.id}: `));
    await taken.finish();
  }));

test('a file that is not a database, and a directory that does not exist', async () => {
  const dir = tempDir();
  const junk = path.join(dir, 'junk.db');
  fs.writeFileSync(junk, 'x'.repeat(4096));
  await rejectsTq(() => tq.open(junk), tq.NotADatabaseError, /./);
  assert.equal(fs.readFileSync(junk, 'utf8'), 'x'.repeat(4096));
  await rejectsTq(() => tq.open(path.join(dir, 'missing', 'q.db')), tq.IoError, /./);
});

test('interrupt() ends waiting pulls with InterruptedError, now and later', () =>
  withQueue(async (queue) => {
    const waiting = queue.pull({ wait: 60_000 });
    setImmediate(() => queue.interrupt());
    await assert.rejects(waiting, (error) => error instanceof tq.InterruptedError && error.status === -8);
    await assert.rejects(queue.pull({ wait: 60_000 }), tq.InterruptedError);
    await queue.push(1);
    await (await queue.pull({ wait: 60_000 })).finish();
  }));

test('an AbortSignal already aborted rejects with its reason and claims nothing', () =>
  withQueue(async (queue) => {
    await queue.push(1);
    const reason = new Error('stop');
    await assert.rejects(queue.pull({ signal: AbortSignal.abort(reason) }), (error) => error === reason);
    assert.equal(await queue.count(), 1);
  }));
