'use strict';
// Attempts: each delivery that ended without finishing its task is listed
// by the task's snapshot, oldest first, with its reason and holder.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { tq, withQueue } = require('./helpers');

test('a snapshot lists the failed and expired deliveries, oldest first', () =>
  withQueue(
    async (queue) => {
      const before = Date.now();
      const id = await queue.push({ order: 7 }, { maxAttempts: 3 });
      const first = await queue.pull();
      await first.fail('HTTP 502');
      await queue.pull({ lease: 30 });
      await sleep(60);
      const third = await queue.pull();
      assert.equal(third.id, id);
      await third.fail('HTTP 503');

      const snapshot = await queue.task(id);
      assert.equal(snapshot.state, 'dead');
      assert.deepEqual(
        snapshot.endedAttempts.map((attempt) => [attempt.attempt, attempt.outcome, attempt.reason]),
        [
          [1, 'failed', 'HTTP 502'],
          [2, 'lease expired', snapshot.endedAttempts[1].reason],
          [3, 'failed', 'HTTP 503'],
        ],
      );
      assert.match(snapshot.endedAttempts[1].reason, /expired/);
      for (const attempt of snapshot.endedAttempts) {
        assert.equal(attempt.holderPid, process.pid);
        assert.ok(attempt.holderId > 0);
        assert.ok(attempt.startedAt.getTime() >= before - 1000);
        assert.ok(attempt.endedAt >= attempt.startedAt);
        assert.ok(Object.isFrozen(attempt));
      }
      assert.equal(tq.ATTEMPTS_KEPT, 20);
    },
    { keepHistory: true, retryBackoff: { min: 0, max: 0 } },
  ));

test('a finished task and a listed task list no attempts', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push({ n: 1 });
      const task = await queue.pull();
      await task.finish();
      assert.deepEqual((await queue.task(id)).endedAttempts, []);
      await queue.push({ n: 2 });
      const failing = await queue.pull();
      await failing.fail('no');
      const [listed] = await queue.list('dead');
      assert.deepEqual(listed.endedAttempts, []);
    },
    { keepHistory: true, maxAttempts: 1 },
  ));
