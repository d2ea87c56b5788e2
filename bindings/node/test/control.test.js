'use strict';
// Cancelling a task, snoozing a delivery, pausing a queue and limiting how
// many of its tasks are leased at once.

const test = require('node:test');
const assert = require('node:assert/strict');
const { queuePath, tq, withQueue } = require('./helpers');

test('a pending task cancelled leaves the line; a leased one ends at its holder', () =>
  withQueue(
    async (queue) => {
      const pending = queue.push({ n: 1 });
      assert.equal(queue.cancelTask(pending, 'not wanted'), 'cancelled');
      assert.equal(queue.cancelTask(pending), 'cancelled');
      assert.equal(await queue.pull(), null);
      const [cancelled] = queue.list('cancelled');
      assert.equal(cancelled.id, pending);
      assert.equal(cancelled.lastError, 'not wanted');

      queue.push({ n: 2 });
      const task = await queue.pull();
      assert.equal(queue.cancelTask(task.id, new Error('stop')), 'leased');
      assert.throws(() => task.extend(1000), (error) => error instanceof tq.CancelledError && error.status === -10);
      assert.equal(task.closed, true);
      assert.throws(() => task.finish(), /was cancelled/);
      assert.deepEqual(queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 2 });
      assert.equal(queue.purge({ state: 'cancelled' }), 2);
      assert.throws(() => queue.cancelTask(12345), tq.InvalidArgumentError);
    },
    { keepHistory: true },
  ));

test('a watched task is told of its cancellation by another handle, while its holder works on', () =>
  withQueue(async (queue) => {
    const id = queue.push({ long: true });
    const task = await queue.pull();
    const watched = task.watchCancellation();
    await assert.rejects(task.watchCancellation(), /already watched/);
    task.extend(60_000);
    const other = tq.open(queue.location);
    try {
      assert.equal(other.cancelTask(id, 'stop'), 'leased');
    } finally {
      await other.close();
    }
    assert.equal(await watched, 'cancelled');
    assert.throws(() => task.finish(), tq.CancelledError);
  }));

test('a watch ends with the delivery, its signal or the queue', async () => {
  await withQueue(async (queue) => {
    queue.pushMany(['1', '2']);
    let task = await queue.pull();
    let watched = task.watchCancellation();
    task.finish();
    assert.equal(await watched, 'ended');
    await assert.rejects(task.watchCancellation(), tq.NotHeldError);

    task = await queue.pull();
    const stop = new AbortController();
    watched = task.watchCancellation({ signal: stop.signal });
    stop.abort(new Error('work done'));
    await assert.rejects(watched, /work done/);
    assert.equal(await task.watchCancellation({ signal: AbortSignal.abort() }).catch(() => 'refused'), 'refused');
    task.close();
    assert.equal(await task.watchCancellation().catch((error) => error.constructor), tq.ClosedError);
  });
  const queue = tq.open(queuePath());
  queue.push('3');
  const task = await queue.pull();
  const watched = task.watchCancellation();
  await queue.close();
  await assert.rejects(watched, tq.ClosedError);
  task.close();
});

test('a snoozed delivery comes back later without using an attempt', () =>
  withQueue(async (queue) => {
    queue.push({ n: 1 });
    const task = await queue.pull();
    task.snooze(3_600_000);
    assert.throws(() => task.finish(), /already snoozed/);
    assert.equal(await queue.pull(), null);
    const [waiting] = queue.list('pending');
    assert.ok(waiting.runAt > new Date(Date.now() + 3_500_000));
    assert.equal(waiting.attempts, 0);
    assert.throws(() => task.snooze(-1), tq.InvalidArgumentError);
  }));

test('a paused queue gives nothing until resumed; a waiting pull takes a task then', async () => {
  const path = queuePath();
  const queue = tq.open(path);
  const other = tq.open(path);
  try {
    assert.equal(queue.pausedUntil(), null);
    queue.pause();
    assert.equal(other.pausedUntil(), Infinity);
    queue.push({ n: 1 });
    assert.equal(await other.pull(), null);
    const waiting = other.pull({ wait: 120_000 });
    setImmediate(() => queue.resume());
    const task = await waiting;
    assert.deepEqual(task.payload, { n: 1 });
    task.finish();
    const until = new Date(Date.now() + 3_600_000);
    queue.pause(until);
    assert.equal(queue.pausedUntil().getTime(), until.getTime());
    queue.resume();
    assert.throws(() => queue.pause(Date.now() - 1000), tq.InvalidArgumentError);
    assert.throws(() => queue.pause(NaN), /until must be/);
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('a concurrency limit caps the tasks leased at once', () =>
  withQueue(async (queue) => {
    assert.equal(queue.concurrencyLimit(), null);
    queue.setConcurrencyLimit(2);
    assert.equal(queue.concurrencyLimit(), 2);
    queue.pushMany([1, 2, 3]);
    const [first, second] = [await queue.pull(), await queue.pull()];
    assert.equal(await queue.pull(), null);
    first.finish();
    const third = await queue.pull();
    assert.equal(third.payload, 3);
    assert.throws(() => queue.setConcurrencyLimit(0), tq.InvalidArgumentError);
    queue.setConcurrencyLimit(null);
    assert.equal(queue.concurrencyLimit(), null);
    queue.finishMany([second, third]);
  }));

test('a rate limit allows that many claims per window', () =>
  withQueue(async (queue) => {
    assert.equal(queue.rateLimit(), null);
    assert.throws(() => queue.setRateLimit(0, 1000), tq.InvalidArgumentError);
    queue.setRateLimit(2, 400);
    assert.deepEqual(queue.rateLimit(), { claims: 2, perMs: 400 });
    queue.pushMany([1, 2, 3]);
    const [first, second] = [await queue.pull(), await queue.pull()];
    assert.equal(await queue.pull(), null);
    const third = await queue.pull({ wait: 20000 });
    assert.equal(third.payload, 3);
    queue.setRateLimit(null);
    assert.equal(queue.rateLimit(), null);
    queue.finishMany([first, second, third]);
  }));
