'use strict';
// Ordered groups: a group's tasks delivered at most groupMax at a time, in
// push order for 1, while other groups proceed; a snapshot's group; bad
// keys and limits refused with nothing stored.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

/** The payloads of every task ready now, claimed (and left leased). */
async function claimAll(queue) {
  const claimed = [];
  for (let task; (task = await queue.pull()); ) claimed.push(task);
  return claimed;
}

test('a group of one at a time is delivered in push order, one at a time, beside other groups', () =>
  withQueue(async (queue) => {
    // A higher priority does not overtake the group's order.
    const ids = [await queue.push('"a1"', { group: 'account-1' }), await queue.push('"a2"', { group: 'account-1', priority: 9 })];
    ids.push(...await queue.pushMany(['"a3"', '"a4"'], { group: 'account-1', groupMax: 1 }));
    const other = await queue.push('"b1"', { group: 'account-2' });
    const free = await queue.push('"free"');
    const snapshot = await queue.task(ids[1]);
    assert.equal(snapshot.group, 'account-1');
    assert.deepEqual(snapshot.waitingFor, [ids[0]]);
    assert.equal((await queue.task(free)).group, null);
    assert.equal(await queue.groupsWaiting(), 1);

    let claimed = await claimAll(queue);
    assert.deepEqual(claimed.map((task) => task.payload).sort(), ['a1', 'b1', 'free']);
    assert.ok(claimed.every((task) => task.group === null));
    const order = [];
    for (;;) {
      const mine = claimed.filter((task) => task.payload.startsWith('a'));
      for (const task of claimed) await task.finish();
      if (!mine.length) break;
      assert.equal(mine.length, 1);
      order.push(mine[0].payload);
      claimed = await claimAll(queue);
    }
    assert.deepEqual(order, ['a1', 'a2', 'a3', 'a4']);
    assert.equal(await queue.groupsWaiting(), 0);
    assert.equal(await queue.task(other), null);
    assert.equal(await queue.count(), 0);
  }));

test('groupMax tasks of a group run at once', () =>
  withQueue(async (queue) => {
    await queue.pushMany([1, 2, 3, 4, 5], { group: 'g', groupMax: 2 });
    const first = await claimAll(queue);
    assert.deepEqual(first.map((task) => task.payload), [1, 2]);
    // Each task waits for the task pushed groupMax before it.
    await first[1].finish();
    const fourth = await claimAll(queue);
    assert.deepEqual(fourth.map((task) => task.payload), [4]);
    await first[0].finish();
    const third = await claimAll(queue);
    assert.deepEqual(third.map((task) => task.payload), [3]);
    await fourth[0].finish();
    assert.deepEqual(await claimAll(queue), []);
    await third[0].finish();
    assert.deepEqual((await claimAll(queue)).map((task) => task.payload), [5]);
  }));

test('bad groups are refused and store nothing', () =>
  withQueue(async (queue) => {
    for (const [options, error, message] of [
      [{ group: 'k'.repeat(tq.MAX_UNIQUE_KEY_LEN + 1) }, tq.InvalidArgumentError, /group key must be 1 to 1024 bytes long, got 1025/],
      [{ group: '' }, tq.InvalidArgumentError, /got 0 bytes/],
      [{ group: 'g', groupMax: 0 }, tq.InvalidArgumentError, /a group delivers 1 to 1000 of its tasks at once, got 0/],
      [{ group: 'g', groupMax: tq.MAX_GROUP_AT_ONCE + 1 }, tq.InvalidArgumentError, /got 1001/],
      [{ group: 'g', groupMax: -1 }, tq.InvalidArgumentError, /groupMax must be between/],
      [{ group: 'g', groupMax: '2' }, TypeError, /groupMax must be an integer/],
      [{ groupMax: 2 }, tq.InvalidArgumentError, /groupMax needs a group/],
      [{ group: 7 }, TypeError, /group must be a string/],
      [{ group: 'a\0b' }, tq.InvalidArgumentError, /contains a NUL character/],
    ]) {
      const check = (thrown) => thrown instanceof error && message.test(thrown.message);
      const shown = JSON.stringify(options).slice(0, 60);
      await assert.rejects(async () => queue.push(1, options), check, shown);
      await assert.rejects(async () => queue.pushMany([1, 2], options), check, shown);
      await assert.rejects(async () => queue.pushItems([{ payload: 1 }, { payload: 2, ...options }]), (thrown) => check(thrown) && thrown.index === 1, shown);
    }
    assert.equal(await queue.count(), 0);
    // The longest key is taken.
    const id = await queue.push(1, { group: 'k'.repeat(tq.MAX_UNIQUE_KEY_LEN), groupMax: tq.MAX_GROUP_AT_ONCE });
    assert.equal((await queue.task(id)).group.length, tq.MAX_UNIQUE_KEY_LEN);
  }));
