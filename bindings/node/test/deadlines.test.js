'use strict';
// Expiries and deadlines: a pull never delivers a task whose limit has
// passed, and ends it as dead.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

test('an expired task is ended by the pull, which takes the next', () =>
  withQueue(
    async (queue) => {
      const expiry = new Date(Date.now() - 1000);
      const expired = await queue.push('"late"', { expireAt: expiry, deadlineAfter: 3_600_000 });
      const next = await queue.push('"next"');
      const snapshot = await queue.task(expired);
      assert.deepEqual(snapshot.expiresAt, expiry);
      assert.ok(snapshot.deadline > expiry);
      assert.equal((await queue.task(next)).expiresAt, null);

      const task = await queue.pull();
      assert.equal(task.id, next);
      assert.equal(task.deadline, null); // a delivery carries no limits
      await task.finish();
      const ended = await queue.task(expired);
      assert.equal(ended.state, 'dead');
      assert.equal(ended.lastError, 'expired');
    },
    { keepHistory: true },
  ));

test('a deadline passed ends the retries', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push(1, { deadlineAfter: 200 });
      await (await queue.pull()).fail('once');
      const deadline = (await queue.task(id)).deadline;
      while (Date.now() <= deadline.getTime()) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.equal(await queue.pull(), null);
      const ended = await queue.task(id);
      assert.equal(ended.state, 'dead');
      assert.equal(ended.lastError, 'deadline passed');
    },
    { keepHistory: true, retryBackoff: { min: 0, max: 0 } },
  ));

test('limits given both ways or before the run time are refused', () =>
  withQueue(async (queue) => {
    await assert.rejects(() => queue.push(1, { expireAfter: 1, expireAt: Date.now() + 5 }), /not both/);
    await assert.rejects(() => queue.push(1, { deadlineAfter: 1, deadlineAt: Date.now() + 5 }), /not both/);
    // (The message of an asynchronous call stays on its worker thread.)
    await assert.rejects(() => queue.push(1, { delay: 60_000, expireAfter: 1000 }), tq.InvalidArgumentError);
  }));
