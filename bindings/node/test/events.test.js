'use strict';
// Events and durable sleep: a handler waits for an event (the task is
// handed back meanwhile) and reads the same answer at its next delivery;
// a wait times out; a sleep hands the task back and resolves on replay.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

test('a handler waits for a signal and reads it on replay', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push({ order: 42 });
      const first = await queue.pull();
      await assert.rejects(first.waitFor('payment:42', { timeout: 600_000 }), tq.SuspendedError);
      await assert.rejects(first.finish(), tq.NotHeldError);
      assert.equal(await queue.pull(), null);
      assert.equal(await queue.signal('payment:42', { amount: 10 }), id);
      const second = await queue.pull();
      assert.equal(second.id, id);
      assert.equal(second.attempts, 1);
      assert.deepEqual(await second.waitFor('payment:42', { timeout: 600_000 }), { amount: 10 });
      await assert.rejects(second.waitFor('nothing', { timeout: 0 }), tq.EventTimeoutError);
      await second.finish();
    },
    { keepHistory: true },
  ));

test('an event sent first is kept; a sleep resolves on replay', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.signal('early', [1, 2]), null);
    await assert.rejects(queue.signal('', 1), tq.InvalidArgumentError);
    await queue.push(1);
    const first = await queue.pull();
    assert.deepEqual(await first.waitFor('early', { timeout: 600_000 }), [1, 2]);
    await first.sleepUntil('past', 1);
    await assert.rejects(first.sleep('nap', 50), tq.SuspendedError);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const second = await queue.pull();
    assert.equal(second.attempts, 1);
    await second.sleep('nap', 50);
    await second.finish();
  }));
