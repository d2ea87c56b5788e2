'use strict';
// Round trips through every feature of the API on one SQLite file.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { queuePath, tq, withQueue } = require('./helpers');

test('a pushed task is pulled with its fields and finished', () =>
  withQueue(async (queue) => {
    const id = queue.push({ file: 'a.mp4', sizes: [1, 2] });
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
    task.finish();
    assert.equal(task.closed, true);
    assert.deepEqual(queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
    assert.equal(await queue.pull(), null);
    assert.equal(queue.tryPull(), null);
  }));

test('strings and Buffers are JSON text taken as given; other values go through JSON.stringify', () =>
  withQueue(async (queue) => {
    queue.push('  {"spaced" : true}  ');
    queue.push(Buffer.from('"é"'));
    queue.push(new Uint8Array(Buffer.from('[1]')));
    queue.push(42);
    queue.push(null);
    queue.push('"\u00e9\u{1F600}"');
    const raws = [];
    for (let task; (task = queue.tryPull()); task.finish()) raws.push(task.raw);
    assert.deepEqual(raws, ['  {"spaced" : true}  ', '"é"', '[1]', '42', 'null', '"é😀"']);
  }));

test('priorities come first, delays and run times hold tasks back', () =>
  withQueue(async (queue) => {
    queue.push('"low"');
    queue.push('"high"', { priority: 5 });
    queue.push('"later"', { delay: 3_600_000 });
    queue.push('"at"', { runAt: new Date(Date.now() + 3_600_000) });
    queue.push('"past"', { runAt: 0 });
    const order = [];
    for (let task; (task = queue.tryPull()); task.finish()) order.push(task.payload);
    // A task due at the epoch has been ready longest.
    assert.deepEqual(order, ['high', 'past', 'low']);
    assert.equal(queue.count('pending'), 2);
    const [later, at] = queue.list('pending');
    assert.equal(later.payload, 'later');
    assert.ok(later.runAt > new Date(Date.now() + 3_500_000));
    assert.equal(at.payload, 'at');
  }));

test('a unique key stores one task while it is pending', () =>
  withQueue(async (queue) => {
    const first = queue.pushUnique({ n: 1 }, 'k');
    assert.equal(first.created, true);
    assert.deepEqual(queue.pushUnique({ n: 2 }, 'k'), { id: first.id, created: false });
    assert.equal(queue.push({ n: 3 }, { uniqueKey: 'k' }), first.id);
    assert.equal(queue.count(), 1);
    (await queue.pull()).finish();
    assert.equal(queue.pushUnique({ n: 4 }, 'k', { uniqueFor: 0 }).created, true);
  }));

test('named queues in one file are independent', async () => {
  const path = queuePath();
  const mail = tq.open(path, { queue: 'mail' });
  const video = tq.open(path, { queue: 'video' });
  try {
    assert.equal(mail.name, 'mail');
    mail.push({ to: 'a' });
    assert.equal(video.count(), 0);
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
      const id = queue.push({ n: 1 }, { maxAttempts: 2 });
      (await queue.pull()).fail('first');
      const second = await queue.pull({ wait: 5000 });
      assert.equal(second.attempts, 2);
      assert.equal(second.lastError, 'first');
      second.fail(new RangeError('second'));
      assert.equal(queue.count('dead'), 1);
      const [dead] = queue.list('dead');
      assert.equal(dead.id, id);
      assert.equal(dead.state, 'dead');
      assert.equal(dead.lastError, 'RangeError: second');
      queue.retryDead(id);
      const again = await queue.pull();
      assert.equal(again.attempts, 1);
      again.fail();
      (await queue.pull()).fail();
      assert.equal(queue.retryAllDead(), 1);
      queue.tryPull().fail('x\0y');
      assert.equal(queue.list('pending')[0].lastError, 'x\\u0000y');
      queue.tryPull().fail();
      assert.equal(queue.purge({ state: 'dead' }), 1);
    },
    { retryBackoff: { min: 0, max: 0 } },
  ));

test('history keeps finished tasks until purged', () =>
  withQueue(
    async (queue) => {
      queue.pushMany([1, 2, 3]);
      queue.finishMany(await queue.pullMany(3));
      assert.equal(queue.count('done'), 3);
      assert.equal(queue.purge({ olderThan: 3_600_000 }), 0);
      assert.equal(queue.purge(), 3);
    },
    { keepHistory: true },
  ));

test('batches: pushMany, pullMany and finishMany', () =>
  withQueue(async (queue) => {
    const ids = queue.pushMany(Array.from({ length: 10 }, (_, i) => ({ i })), { priority: 1 });
    assert.equal(ids.length, 10);
    assert.deepEqual(queue.pushMany([]), []);
    const tasks = await queue.pullMany(4);
    assert.deepEqual(
      tasks.map((task) => task.payload.i),
      [0, 1, 2, 3],
    );
    tasks[0].finish();
    // A task given twice counts once; one already finished is not held.
    assert.deepEqual(queue.finishMany([tasks[0], tasks[1], tasks[2], tasks[2], tasks[3]]), [false, true, true, true, true]);
    assert.equal(queue.count(), 6);
    assert.equal((await queue.pullMany(100)).length, 6);
    assert.deepEqual(await queue.pullMany(5), []);
  }));

test('finishAndPull finishes and claims the next in one call', () =>
  withQueue(async (queue) => {
    queue.pushMany(['"a"', '"b"']);
    const first = await queue.pull();
    const second = first.finishAndPull({ lease: 60_000 });
    assert.equal(first.closed, true);
    assert.equal(second.payload, 'b');
    assert.equal(second.finishAndPull(), null);
    assert.deepEqual(queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  }));

test('an expired lease is recovered and the old delivery is no longer held', () =>
  withQueue(async (queue) => {
    queue.push({ n: 1 });
    const task = await queue.pull({ lease: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(queue.recover(), 1);
    const again = await queue.pull();
    assert.equal(again.attempts, 2);
    assert.throws(() => task.extend(1000), tq.NotHeldError);
    assert.throws(() => task.finish(), /no longer held/);
    again.extend(60_000);
    again.finish();
  }));

test('oldestReadyAge, list pages, iterTasks, checkpoint and walSize', () =>
  withQueue(async (queue) => {
    assert.equal(queue.oldestReadyAge(), null);
    const ids = queue.pushMany(Array.from({ length: 7 }, (_, i) => i));
    assert.ok(queue.oldestReadyAge() >= 0);
    const page = queue.list('pending', { limit: 3 });
    assert.deepEqual(
      page.map((task) => task.id),
      ids.slice(0, 3),
    );
    assert.deepEqual(
      queue.list('pending', { afterId: ids[5] }).map((task) => task.payload),
      [6],
    );
    assert.deepEqual(
      [...queue.iterTasks('pending', { pageSize: 2 })].map((task) => task.id),
      ids,
    );
    assert.ok(queue.walSize() > 0);
    assert.equal(queue.checkpoint(), 0);
    assert.equal(queue.walSize(), 0);
  }));

test('tasks() yields tasks as they come and ends when none comes within its wait, or on abort', () =>
  withQueue(async (queue) => {
    queue.pushMany([1, 2, 3]);
    const seen = [];
    for await (const task of queue.tasks({ wait: 0 })) {
      seen.push(task.payload);
      task.finish();
      if (task.payload === 1) queue.push(4);
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
    const stop = new AbortController();
    setImmediate(() => stop.abort());
    for await (const task of queue.tasks({ signal: stop.signal })) assert.fail(`no task was pushed: ${task.raw}`);
  }));

test('after close, tasks stay readable and fail clearly; the file keeps them', async () => {
  const path = queuePath();
  const queue = tq.open(path, { durability: 'normal' });
  queue.pushMany(['"kept"', '"dropped"']);
  const task = await queue.pull();
  const other = await queue.pull();
  await queue.close();
  await queue.close();
  assert.equal(queue.closed, true);
  assert.equal(task.payload, 'kept');
  assert.throws(() => task.finish(), tq.ClosedError);
  assert.throws(() => queue.push(1), /the queue "default" in ".*queue.db" is closed/);
  await assert.rejects(queue.pull(), tq.ClosedError);
  task.close();
  other.close();
  assert.throws(() => other.finish(), /task \d+ is closed/);
  const reopened = tq.open(path);
  assert.equal(reopened.count('leased'), 2);
  await reopened.close();
  assert.ok(fs.existsSync(path));
});

test('the package says where its library came from and which version it is', () => {
  assert.equal(tq.libraryVersion(), '0.3.0');
  assert.ok(tq.libraryPath.length > 0);
  assert.equal(tq.Durability.NORMAL, 1);
  assert.equal(tq.State.DEAD, 3);
});
