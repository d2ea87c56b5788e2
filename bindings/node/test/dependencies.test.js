'use strict';
// Tasks that wait for others: after, onParentFailure, a graph stored with
// pushItems, a pulled task's parents and a snapshot's waitingFor.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

test('a child is released once its parent is finished, and names it as a parent', () =>
  withQueue(async (queue) => {
    const parent = await queue.push({ step: 'fetch' });
    const other = await queue.push({ step: 'other' });
    const child = await queue.push({ step: 'index' }, { after: [other, parent] });
    const blocked = await queue.task(child);
    assert.equal(blocked.state, 'pending');
    assert.deepEqual(blocked.waitingFor, [parent, other]);
    assert.deepEqual(blocked.parents, []);
    assert.equal(blocked.group, null);
    assert.equal(await queue.count('pending'), 3);

    const first = await queue.pull();
    assert.equal(first.id, parent);
    assert.deepEqual(first.parents, []);
    assert.deepEqual(first.waitingFor, []);
    const second = await queue.pull();
    assert.equal(second.id, other);
    // The child waits for both.
    assert.equal(await queue.pull(), null);
    await first.finish();
    assert.deepEqual((await queue.task(child)).waitingFor, [other]);
    assert.equal(await queue.pull(), null);
    await second.finish();
    assert.deepEqual((await queue.task(child)).waitingFor, []);
    const released = await queue.pull();
    assert.equal(released.id, child);
    assert.deepEqual(released.parents, [parent, other]);
    assert.ok(Object.isFrozen(released.parents));
    await released.finish();
  }));

test('a parent ending dead cancels its child, unless the child runs anyway', () =>
  withQueue(
    async (queue) => {
      const parent = await queue.push({ n: 1 }, { maxAttempts: 1 });
      const cancelled = await queue.push({ n: 2 }, { after: [parent] });
      const grandchild = await queue.push({ n: 3 }, { after: [cancelled], onParentFailure: 'runAnyway' });
      const anyway = await queue.push({ n: 4 }, { after: [parent], onParentFailure: tq.ParentFailure.RUN_ANYWAY });
      const explicit = await queue.push({ n: 5 }, { after: [parent], onParentFailure: 'cancel' });
      await (await queue.pull()).fail('broken');
      assert.equal((await queue.task(parent)).state, 'dead');
      assert.equal((await queue.task(cancelled)).state, 'cancelled');
      assert.match((await queue.task(cancelled)).lastError, new RegExp(String(parent)));
      assert.equal((await queue.task(explicit)).state, 'cancelled');
      const ran = [];
      for (let task; (task = await queue.pull()); await task.finish()) ran.push(task.id);
      assert.deepEqual(ran.sort((x, y) => x - y), [grandchild, anyway]);
    },
    { keepHistory: true },
  ));

test('pushItems stores a graph in one call; a bad item stores nothing', () =>
  withQueue(async (queue) => {
    const stored = await queue.push('"stored"');
    const ids = await queue.pushItems([
      { payload: { step: 'a' } },
      { payload: { step: 'b' }, afterItems: [0], priority: 3 },
      { payload: { step: 'c' }, afterItems: [0, 1], after: [stored] },
      { payload: '"unique"', uniqueKey: 'k' },
    ]);
    assert.equal(ids.length, 4);
    assert.deepEqual((await queue.task(ids[1])).waitingFor, [ids[0]]);
    assert.deepEqual((await queue.task(ids[2])).waitingFor, [stored, ids[0], ids[1]].sort((x, y) => x - y));
    assert.equal((await queue.task(ids[1])).priority, 3);
    // An item whose unique key a task holds gives that task's id.
    const again = await queue.pushItems([{ payload: '"again"', uniqueKey: 'k' }, { payload: '"after it"', afterItems: [0] }]);
    assert.equal(again[0], ids[3]);
    assert.deepEqual((await queue.task(again[1])).waitingFor, [ids[3]]);
    assert.deepEqual(await queue.pushItems([]), []);
    assert.deepEqual((await queue.pushItems(new Set([{ payload: 1 }]))).length, 1);
    const count = await queue.count();

    for (const [items, error, index, message] of [
      // The library's message stays on the worker thread: no position.
      [[{ payload: 1 }, { payload: 2, afterItems: [1] }], tq.InvalidArgumentError, undefined, /^tq_push_items: /],
      [[{ payload: 1, afterItems: [1] }, { payload: 2 }], tq.InvalidArgumentError, undefined, /^tq_push_items: /],
      [[{ payload: 1 }, { payload: 2, after: [999_999] }], tq.InvalidArgumentError, undefined, /^tq_push_items: /],
      [[{ payload: 1 }, { payload: 'nope' }], tq.InvalidJsonError, 1, /^item 1: /],
      [[{ payload: 1 }, { payload: 2, priority: 'high' }], TypeError, 1, /^item 1: priority must be an integer/],
      [[{ payload: 1 }, { payload: 2, afterItems: [-1] }], tq.InvalidArgumentError, 1, /^item 1: afterItems\[0\] must be between/],
      [[{ payload: 1 }, 2], TypeError, 1, /^item 1: an item is an object/],
      [[{ payload: 1 }, { priority: 1 }], TypeError, 1, /^item 1: a payload must be JSON/],
    ]) {
      await assert.rejects(
        () => queue.pushItems(items),
        (thrown) => thrown instanceof error && thrown.index === index && message.test(thrown.message),
        JSON.stringify(items),
      );
    }
    await assert.rejects(async () => queue.pushItems({ payload: 1 }), /pushItems takes an iterable of items/);
    assert.equal(await queue.count(), count);
  }));

test('bad dependencies are refused and store nothing', () =>
  withQueue(async (queue) => {
    const parent = await queue.push(1);
    for (const [options, error, message] of [
      [{ after: [999_999] }, tq.InvalidArgumentError, /^tq_push: invalid argument/],
      [{ after: [0] }, tq.InvalidArgumentError, /named by its id, which is positive, got 0/],
      [{ after: [1.5] }, tq.InvalidArgumentError, /after\[0\] must be an integer/],
      [{ after: parent }, TypeError, /after must be an array/],
      [{ after: ['1'] }, TypeError, /after\[0\] must be an integer/],
      [{ afterItems: [0] }, tq.InvalidArgumentError, /^tq_push: invalid argument/],
      [{ after: [parent], onParentFailure: 'sometimes' }, tq.InvalidArgumentError, /unknown onParentFailure "sometimes"; expected one of cancel, runAnyway/],
      [{ after: [parent], onParentFailure: 7 }, tq.InvalidArgumentError, /unknown parent failure policy 7/],
    ]) {
      await assert.rejects(async () => queue.push(2, options), (thrown) => thrown instanceof error && message.test(thrown.message), JSON.stringify(options).slice(0, 80));
    }
    await assert.rejects(async () => queue.pushMany([2, 3], { after: [999_999] }), tq.InvalidArgumentError);
    assert.equal(await queue.count(), 1);
    // pushMany makes every task wait for the same parents.
    const children = await queue.pushMany([2, 3], { after: [parent] });
    for (const id of children) assert.deepEqual((await queue.task(id)).waitingFor, [parent]);
  }));
