'use strict';
// Round trips through every feature of the API on one SQLite file.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { countingCalls, queuePath, tq, withQueue } = require('./helpers');

test('a pushed task is pulled with its fields and finished', () =>
  withQueue(async (queue) => {
    const id = await queue.push({ file: 'a.mp4', sizes: [1, 2] });
    assert.equal(typeof id, 'number');
    const task = await queue.pull();
    assert.equal(task.id, id);
    assert.deepEqual(task.payload, { file: 'a.mp4', sizes: [1, 2] });
    assert.equal(task.raw, '{"file":"a.mp4","sizes":[1,2]}');
    assert.equal(task.attempts, 1);
    assert.equal(task.priority, 0);
    assert.equal(task.maxAttempts, tq.DEFAULT_MAX_ATTEMPTS);
    assert.equal(task.state, 'leased');
    assert.equal(task.lastError, null);
    assert.ok(task.runAt instanceof Date && Math.abs(task.runAt - Date.now()) < 60_000);
    assert.equal(task.closed, false);
    // The delivery's token, random over 64 bits, is a BigInt.
    assert.equal(typeof task.token, 'bigint');
    assert.notEqual(task.token, 0n);
    await task.finish();
    assert.equal(task.closed, true);
    assert.equal(typeof task.token, 'bigint');
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
    assert.equal(await queue.pull(), null);
    assert.equal(await queue.pull(), null);
  }));

test('strings and Buffers are JSON text taken as given; other values go through JSON.stringify', () =>
  withQueue(async (queue) => {
    await queue.push('  {"spaced" : true}  ');
    await queue.push(Buffer.from('"é"'));
    await queue.push(new Uint8Array(Buffer.from('[1]')));
    await queue.push(42);
    await queue.push(null);
    await queue.push('"\u00e9\u{1F600}"');
    const raws = [];
    for (let task; (task = await queue.pull()); await task.finish()) raws.push(task.raw);
    assert.deepEqual(raws, ['  {"spaced" : true}  ', '"é"', '[1]', '42', 'null', '"é😀"']);
  }));

test('priorities come first, delays and run times hold tasks back', () =>
  withQueue(async (queue) => {
    await queue.push('"low"');
    await queue.push('"high"', { priority: 5 });
    await queue.push('"later"', { delay: 3_600_000 });
    await queue.push('"at"', { runAt: new Date(Date.now() + 3_600_000) });
    await queue.push('"past"', { runAt: 0 });
    const order = [];
    for (let task; (task = await queue.pull()); await task.finish()) order.push(task.payload);
    // A task due at the epoch has been ready longest.
    assert.deepEqual(order, ['high', 'past', 'low']);
    assert.equal(await queue.count('pending'), 2);
    const [later, at] = await queue.list('pending');
    assert.equal(later.payload, 'later');
    assert.ok(later.runAt > new Date(Date.now() + 3_500_000));
    assert.equal(at.payload, 'at');
  }));

test('a unique key stores one task while it is pending', () =>
  withQueue(async (queue) => {
    const first = await queue.pushUnique({ n: 1 }, 'k');
    assert.equal(first.created, true);
    assert.deepEqual(await queue.pushUnique({ n: 2 }, 'k'), { id: first.id, created: false, merged: false });
    assert.equal(await queue.push({ n: 3 }, { uniqueKey: 'k' }), first.id);
    assert.equal(await queue.count(), 1);
    await (await queue.pull()).finish();
    assert.equal((await queue.pushUnique({ n: 4 }, 'k', { uniqueFor: 0 })).created, true);
  }));

test('a pending holder of the key takes a replacing or debouncing push', () =>
  withQueue(async (queue) => {
    const first = await queue.push({ n: 1 }, { uniqueKey: 'doc' });
    const merging = { replacePending: true, delay: 3_600_000, debounce: 7_200_000 };
    assert.deepEqual(await queue.pushUnique({ n: 2 }, 'doc', merging), { id: first, created: false, merged: true });
    assert.equal(await queue.count(), 1);
    assert.equal(await queue.pull(), null, 'debounced an hour away');
    // A debounce to now makes it ready, with the newest payload.
    assert.equal(await queue.push({ n: 3 }, { uniqueKey: 'doc', replacePending: true, debounce: 1 }), first);
    const task = await queue.pull();
    assert.deepEqual([task.id, task.payload], [first, { n: 3 }]);
    // A task being delivered is never changed.
    assert.deepEqual(await queue.pushUnique({ n: 4 }, 'doc', merging), { id: first, created: false, merged: false });
    await task.finish();
    for (const bad of [{ replacePending: true }, { uniqueKey: 'k', debounce: 0 }, { uniqueKey: 'k', replacePending: true, group: 'g' }]) {
      await assert.rejects(async () => queue.push(5, bad), tq.InvalidArgumentError);
    }
    await assert.rejects(async () => queue.push(5, { uniqueKey: 'k', replacePending: 'yes' }), TypeError);
    assert.equal(await queue.count(), 0);
  }));

test('named queues in one file are independent', async () => {
  const path = queuePath();
  const mail = await tq.open(path, { queue: 'mail' });
  const video = await tq.open(path, { queue: 'video' });
  try {
    assert.equal(mail.name, 'mail');
    await mail.push({ to: 'a' });
    assert.equal(await video.count(), 0);
    assert.equal(await video.pull(), null);
    assert.equal((await mail.pull()).payload.to, 'a');
  } finally {
    await mail.close();
    await video.close();
  }
});

test('a failed task is retried, then dead, then retried by hand', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push({ n: 1 }, { maxAttempts: 2 });
      await (await queue.pull()).fail('first');
      const second = await queue.pull({ wait: 5000 });
      assert.equal(second.attempts, 2);
      assert.equal(second.lastError, 'first');
      await second.fail(new RangeError('second'));
      assert.equal(await queue.count('dead'), 1);
      const [dead] = await queue.list('dead');
      assert.equal(dead.id, id);
      assert.equal(dead.state, 'dead');
      assert.equal(dead.lastError, 'RangeError: second');
      await queue.retryDead(id);
      const again = await queue.pull();
      assert.equal(again.attempts, 1);
      await again.fail();
      await (await queue.pull()).fail();
      assert.equal(await queue.retryAllDead(), 1);
      await (await queue.pull()).fail('x\0y');
      assert.equal((await queue.list('pending'))[0].lastError, 'x\\u0000y');
      await (await queue.pull()).fail();
      assert.equal(await queue.purge({ state: 'dead' }), 1);
    },
    { retryBackoff: { min: 0, max: 0 } },
  ));

test('history keeps finished tasks until purged', () =>
  withQueue(
    async (queue) => {
      await queue.pushMany([1, 2, 3]);
      await queue.finishMany(await queue.pullMany(3));
      assert.equal(await queue.count('done'), 3);
      assert.equal(await queue.purge({ olderThan: 3_600_000 }), 0);
      assert.equal(await queue.purge(), 3);
    },
    { keepHistory: true },
  ));

test('batches: pushMany, pullMany and finishMany', () =>
  withQueue(async (queue) => {
    const ids = await queue.pushMany(Array.from({ length: 10 }, (_, i) => ({ i })), { priority: 1 });
    assert.equal(ids.length, 10);
    assert.deepEqual(await queue.pushMany([]), []);
    const tasks = await queue.pullMany(4);
    assert.deepEqual(
      tasks.map((task) => task.payload.i),
      [0, 1, 2, 3],
    );
    await tasks[0].finish();
    // A task given twice counts once; one already finished is not held.
    assert.deepEqual(await queue.finishMany([tasks[0], tasks[1], tasks[2], tasks[2], tasks[3]]), [false, true, true, true, true]);
    assert.equal(await queue.count(), 6);
    assert.equal((await queue.pullMany(100)).length, 6);
    assert.deepEqual(await queue.pullMany(5), []);
  }));

test('finishAndPull finishes and claims the next in one call', () =>
  withQueue(async (queue) => {
    await queue.pushMany(['"a"', '"b"']);
    const first = await queue.pull();
    const second = await first.finishAndPull({ lease: 60_000 });
    assert.equal(first.closed, true);
    assert.equal(second.payload, 'b');
    assert.equal(await second.finishAndPull(), null);
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  }));

test('finishAndPullMany finishes a batch and claims the next ones in one call', () =>
  withQueue(async (queue) => {
    const ids = await queue.pushMany(Array.from({ length: 7 }, (_, i) => ({ i })));
    const first = await queue.pullMany(3);
    await first[1].finish();
    const [finished, claimed] = await queue.finishAndPullMany(first, 3, { lease: 60_000 });
    assert.deepEqual(finished, [true, false, true]);
    assert.deepEqual(
      claimed.map((task) => task.id),
      ids.slice(3, 6),
    );
    assert.equal(await queue.count('leased'), 3);
    // n 0 only finishes; no tasks only claims.
    assert.deepEqual(await queue.finishAndPullMany(claimed, 0), [[true, true, true], []]);
    const [none, last] = await queue.finishAndPullMany([], 5);
    assert.deepEqual(none, []);
    assert.deepEqual(
      last.map((task) => task.id),
      ids.slice(6),
    );
    assert.deepEqual(await queue.finishAndPullMany(last, 2), [[true], []]);
    await assert.rejects(queue.finishAndPullMany([1], 1), TypeError);
    await assert.rejects(queue.finishAndPullMany([], -1), tq.InvalidArgumentError);
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  }));

test('an expired lease is recovered and the old delivery is no longer held', () =>
  withQueue(async (queue) => {
    await queue.push({ n: 1 });
    const task = await queue.pull({ lease: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(await queue.recover(), 1);
    const again = await queue.pull();
    assert.equal(again.attempts, 2);
    await assert.rejects(async () => task.extend(1000), tq.NotHeldError);
    await assert.rejects(async () => task.finish(), /no longer held/);
    await again.extend(60_000);
    await again.finish();
  }));

test('oldestReadyAge, list pages, iterTasks, checkpoint and walSize', () =>
  withQueue(async (queue) => {
    assert.equal(await queue.oldestReadyAge(), null);
    const ids = await queue.pushMany(Array.from({ length: 7 }, (_, i) => i));
    assert.ok(await queue.oldestReadyAge() >= 0);
    const page = await queue.list('pending', { limit: 3 });
    assert.deepEqual(
      page.map((task) => task.id),
      ids.slice(0, 3),
    );
    assert.deepEqual(
      (await queue.list('pending', { afterId: ids[5] })).map((task) => task.payload),
      [6],
    );
    const iterated = [];
    for await (const task of queue.iterTasks('pending', { pageSize: 2 })) iterated.push(task.id);
    assert.deepEqual(iterated, ids);
    assert.ok(await queue.walSize() > 0);
    assert.equal(await queue.checkpoint(), 0);
    assert.equal(await queue.walSize(), 0);
  }));

test('tasks() yields tasks as they come and ends when none comes within its wait, or on abort', () =>
  withQueue(async (queue) => {
    await queue.pushMany([1, 2, 3]);
    const seen = [];
    for await (const task of queue.tasks({ wait: 0 })) {
      seen.push(task.payload);
      await task.finish();
      if (task.payload === 1) await queue.push(4);
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
    const stop = new AbortController();
    setImmediate(() => stop.abort());
    for await (const task of queue.tasks({ signal: stop.signal })) assert.fail(`no task was pushed: ${task.raw}`);
  }));

test('calls made in one turn of the event loop share one trip to the pool', () =>
  withQueue(async (queue) => {
    const four = [1, 2, 3, 4];
    const [ids, pushes] = await countingCalls(() => Promise.all(four.map((n) => queue.push(n))));
    assert.deepEqual(pushes, { tq_push_batch: 1 });
    const [tasks, pulls] = await countingCalls(() => Promise.all(four.map(() => queue.pull())));
    assert.deepEqual(pulls, { tq_pull_batch: 1 });
    assert.deepEqual(tasks.map((task) => task.id).sort((a, b) => a - b), ids);
    const [, finishes] = await countingCalls(() => Promise.all(tasks.map((task) => task.finish())));
    assert.deepEqual(finishes, { tq_finish_and_pull_batch: 1 });
    assert.equal(await queue.count('leased'), 0);
  }));

test('calls made before close() in the same turn still run', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  await queue.push(1);
  const task = await queue.pull();
  const pushed = queue.push(2);
  const finished = task.finish();
  await queue.close();
  assert.equal(await pushed, 2);
  await finished;
  const reopened = await tq.open(path);
  assert.deepEqual(await reopened.counts(), { pending: 1, leased: 0, done: 0, dead: 0, cancelled: 0 });
  await reopened.close();
});

test('after close, tasks stay readable and fail clearly; the file keeps them', async () => {
  const path = queuePath();
  const queue = await tq.open(path, { durability: 'normal' });
  await queue.pushMany(['"kept"', '"dropped"']);
  const task = await queue.pull();
  const other = await queue.pull();
  await queue.close();
  await queue.close();
  assert.equal(queue.closed, true);
  assert.equal(task.payload, 'kept');
  await assert.rejects(async () => task.finish(), tq.ClosedError);
  await assert.rejects(async () => queue.push(1), /the queue "default" in ".*queue.db" is closed/);
  await assert.rejects(async () => queue.push(2), tq.ClosedError);
  await assert.rejects(queue.pull(), tq.ClosedError);
  task.close();
  other.close();
  await assert.rejects(async () => other.finish(), /task \d+ is closed/);
  const reopened = await tq.open(path);
  assert.equal(await reopened.count('leased'), 2);
  await reopened.close();
  assert.ok(fs.existsSync(path));
});

test('the package says where its library came from and which version it is', () => {
  assert.equal(tq.libraryVersion(), '0.3.0');
  assert.ok(tq.libraryPath.length > 0);
  assert.equal(tq.Durability.NORMAL, 1);
  assert.equal(tq.State.DEAD, 3);
});
