'use strict';
// Cancelling a task, snoozing a delivery, pausing a queue and limiting how
// many of its tasks are leased at once.

const test = require('node:test');
const assert = require('node:assert/strict');
const { countingCalls, queuePath, tq, withQueue } = require('./helpers');

test('a pending task cancelled leaves the line; a leased one ends at its holder', () =>
  withQueue(
    async (queue) => {
      const pending = await queue.push({ n: 1 });
      assert.equal(await queue.cancelTask(pending, 'not wanted'), 'cancelled');
      assert.equal(await queue.cancelTask(pending), 'cancelled');
      assert.equal(await queue.pull(), null);
      const [cancelled] = await queue.list('cancelled');
      assert.equal(cancelled.id, pending);
      assert.equal(cancelled.lastError, 'not wanted');

      await queue.push({ n: 2 });
      const task = await queue.pull();
      assert.equal(await queue.cancelTask(task.id, new Error('stop')), 'leased');
      await assert.rejects(async () => task.extend(1000), (error) => error instanceof tq.CancelledError && error.status === -10);
      assert.equal(task.closed, true);
      await assert.rejects(async () => task.finish(), /was cancelled/);
      assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 2 });
      assert.equal(await queue.purge({ state: 'cancelled' }), 2);
      await assert.rejects(async () => queue.cancelTask(12345), tq.InvalidArgumentError);
    },
    { keepHistory: true },
  ));

test('a watched task is told of its cancellation by another handle, while its holder works on', () =>
  withQueue(async (queue) => {
    const id = await queue.push({ long: true });
    const task = await queue.pull();
    const watched = task.watchCancellation();
    await assert.rejects(task.watchCancellation(), /already watched/);
    await task.extend(60_000);
    const other = await tq.open(queue.location);
    try {
      assert.equal(await other.cancelTask(id, 'stop'), 'leased');
    } finally {
      await other.close();
    }
    assert.equal(await watched, 'cancelled');
    await assert.rejects(async () => task.finish(), tq.CancelledError);
  }));

test('a watch ends with the delivery, its signal or the queue', async () => {
  await withQueue(async (queue) => {
    await queue.pushMany(['1', '2']);
    let task = await queue.pull();
    let watched = task.watchCancellation();
    await task.finish();
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
  const queue = await tq.open(queuePath());
  await queue.push('3');
  const task = await queue.pull();
  const watched = task.watchCancellation();
  await queue.close();
  await assert.rejects(watched, tq.ClosedError);
  task.close();
});

test('a snoozed delivery comes back later without using an attempt', () =>
  withQueue(async (queue) => {
    await queue.push({ n: 1 });
    const task = await queue.pull();
    await task.snooze(3_600_000);
    await assert.rejects(async () => task.finish(), /already snoozed/);
    assert.equal(await queue.pull(), null);
    const [waiting] = await queue.list('pending');
    assert.ok(waiting.runAt > new Date(Date.now() + 3_500_000));
    assert.equal(waiting.attempts, 0);
    await assert.rejects(async () => task.snooze(-1), tq.InvalidArgumentError);
  }));

test('a paused queue gives nothing until resumed; a waiting pull takes a task then', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const other = await tq.open(path);
  try {
    assert.equal(await queue.pausedUntil(), null);
    await queue.pause();
    assert.equal(await other.pausedUntil(), Infinity);
    await queue.push({ n: 1 });
    assert.equal(await other.pull(), null);
    const waiting = other.pull({ wait: 120_000 });
    setImmediate(() => queue.resume());
    const task = await waiting;
    assert.deepEqual(task.payload, { n: 1 });
    await task.finish();
    const until = new Date(Date.now() + 3_600_000);
    await queue.pause(until);
    assert.equal((await queue.pausedUntil()).getTime(), until.getTime());
    await queue.resume();
    await assert.rejects(async () => queue.pause(Date.now() - 1000), tq.InvalidArgumentError);
    await assert.rejects(async () => queue.pause(NaN), /until must be/);
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('a concurrency limit caps the tasks leased at once', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.concurrencyLimit(), null);
    await queue.setConcurrencyLimit(2);
    assert.equal(await queue.concurrencyLimit(), 2);
    await queue.pushMany([1, 2, 3]);
    const [first, second] = [await queue.pull(), await queue.pull()];
    assert.equal(await queue.pull(), null);
    await first.finish();
    const third = await queue.pull();
    assert.equal(third.payload, 3);
    await assert.rejects(async () => queue.setConcurrencyLimit(0), tq.InvalidArgumentError);
    await queue.setConcurrencyLimit(null);
    assert.equal(await queue.concurrencyLimit(), null);
    await queue.finishMany([second, third]);
  }));

test('a capped queue rejects a push beyond its cap with FullError', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.maxPending(), null);
    await queue.setMaxPending(2);
    assert.equal(await queue.maxPending(), 2);
    await queue.push(1);
    await assert.rejects(async () => queue.pushMany([2, 3]), (error) => error instanceof tq.FullError && error.status === -11);
    assert.equal(await queue.count('pending'), 1);
    await queue.push(2);
    await assert.rejects(async () => queue.push(3, { waitForRoom: 20 }), tq.FullError);
    // Pushes lined up together: the one that fits is stored.
    const task = await queue.pull();
    const results = await Promise.allSettled([queue.push(3), queue.push(4)]);
    assert.deepEqual(results.map((result) => result.status).sort(), ['fulfilled', 'rejected']);
    await task.finish();
    await queue.setMaxPending(null);
    assert.equal(await queue.maxPending(), null);
    await queue.push(5);
  }));

test('a key cap rejects a push beyond it with FullError, and not other keys', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.maxPendingPerKey(), null);
    await queue.setMaxPendingPerKey(1);
    await queue.setKeyMaxPending('b', 2);
    assert.equal(await queue.maxPendingPerKey(), 1);
    assert.equal(await queue.keyMaxPending('a'), 1);
    assert.equal(await queue.keyMaxPending('b'), 2);
    await queue.push(1, { fairKey: 'a' });
    await assert.rejects(async () => queue.push(2, { fairKey: 'a' }), (error) => error instanceof tq.FullError);
    await assert.rejects(async () => queue.pushMany([3, 4, 5], { fairKey: 'b' }), tq.FullError);
    await queue.pushMany([3, 4], { fairKey: 'b' });
    await assert.rejects(async () => queue.setKeyMaxPending('a', -1), tq.InvalidArgumentError);
    await queue.setKeyMaxPending('b', null);
    assert.equal(await queue.keyMaxPending('b'), 1);
    await queue.setMaxPendingPerKey(null);
    assert.equal(await queue.keyMaxPending('a'), null);
    await queue.push(2, { fairKey: 'a' });
  }));

test('fair keys share deliveries by weight', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.fairWeight('a'), 1);
    await assert.rejects(async () => queue.setFairWeight('a', 0), tq.InvalidArgumentError);
    await queue.setFairWeight('a', 2);
    assert.equal(await queue.fairWeight('a'), 2);
    // b's tasks come first in push order; the turns give a two in three.
    await queue.pushMany(Array(10).fill({ key: 'b' }), { fairKey: 'b' });
    for (let i = 0; i < 10; i++) {
      await queue.push({ key: 'a' }, { fairKey: 'a' });
    }
    await assert.rejects(async () => queue.push(1, { fairKey: '' }), tq.InvalidArgumentError);
    const delivered = [];
    for (let i = 0; i < 9; i++) {
      const task = await queue.pull();
      delivered.push(task.payload.key);
      await task.finish();
    }
    assert.equal(delivered.filter((key) => key === 'a').length, 6);
    assert.equal(delivered.filter((key) => key === 'b').length, 3);
  }));

test('a rate limit allows that many claims per window', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.rateLimit(), null);
    await assert.rejects(async () => queue.setRateLimit(0, 1000), tq.InvalidArgumentError);
    await queue.setRateLimit(2, 400);
    assert.deepEqual(await queue.rateLimit(), { claims: 2, perMs: 400 });
    await queue.pushMany([1, 2, 3]);
    const [first, second] = [await queue.pull(), await queue.pull()];
    assert.equal(await queue.pull(), null);
    const third = await queue.pull({ wait: 20000 });
    assert.equal(third.payload, 3);
    await queue.setRateLimit(null);
    assert.equal(await queue.rateLimit(), null);
    await queue.finishMany([first, second, third]);
  }));

test('finishes lined up behind others share one call, each told what finish alone says', () =>
  withQueue(async (queue) => {
    await queue.pushMany([1, 2, 3, 4, 5]);
    const held = await queue.pullMany(3);
    const lost = await queue.pull({ lease: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const taken = await queue.pull();
    const cancelled = await queue.pull();
    assert.equal(await queue.cancelTask(cancelled.id, 'stop'), 'leased');
    // Two calls run at once; the four behind them line up into one.
    const tasks = [...held, lost, cancelled];
    const [outcomes, calls] = await countingCalls(() => Promise.allSettled(tasks.map((task) => task.finish())));
    assert.equal(calls.tq_finish_and_pull_batch, 1);
    assert.deepEqual(
      outcomes.slice(0, 3).map((outcome) => outcome.status),
      ['fulfilled', 'fulfilled', 'fulfilled'],
    );
    const [lostError, cancelledError] = outcomes.slice(3).map((outcome) => outcome.reason);
    assert.ok(lostError instanceof tq.NotHeldError, String(lostError));
    const { lib } = require('../lib/native');
    assert.equal(lostError.message, `task ${lost.id}: tq_finish: ${lib.tq_status_str(tq.NotHeldError.status)}`);
    assert.ok(cancelledError instanceof tq.CancelledError, String(cancelledError));
    assert.equal(cancelledError.message, `task ${cancelled.id}: tq_finish: ${lib.tq_status_str(tq.CancelledError.status)}`);
    await assert.rejects(async () => lost.finish(), /no longer held/);
    await assert.rejects(async () => cancelled.finish(), /was cancelled/);
    assert.equal(await queue.count('leased'), 1);
    await taken.finish();
  }));

test('finishMany tells a task cancelled meanwhile from one no longer held', () =>
  withQueue(async (queue) => {
    await queue.pushMany([1, 2]);
    const lost = await queue.pull({ lease: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [taken, cancelled] = await queue.pullMany(2);
    assert.equal(taken.id, lost.id);
    assert.equal(await queue.cancelTask(cancelled.id), 'leased');
    assert.deepEqual(await queue.finishMany([lost, cancelled]), [false, false]);
    await assert.rejects(async () => lost.finish(), tq.NotHeldError);
    await assert.rejects(async () => cancelled.finish(), tq.CancelledError);
    await taken.finish();
  }));
