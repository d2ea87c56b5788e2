'use strict';
// Results, progress, and waiting for a task's outcome.

const test = require('node:test');
const assert = require('node:assert/strict');
const { queuePath, tq, withQueue } = require('./helpers');

test('a result is kept without history for any handle to read', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const other = await tq.open(path);
  try {
    const id = await queue.push({ file: 'a.png' });
    const task = await queue.pull();
    await task.finish({ result: { width: 640 } });
    await assert.rejects(async () => task.finish(), /already finished/);
    const snapshot = await other.task(id);
    assert.equal(snapshot.state, 'done');
    assert.deepEqual(snapshot.payload, { file: 'a.png' });
    assert.deepEqual(snapshot.result, { width: 640 });
    assert.equal(snapshot.rawResult, '{"width":640}');
    assert.equal(snapshot.rawProgress, null);
    assert.equal(snapshot.progress, undefined);
    assert.equal(await other.task(id + 1), null);
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('a result given as JSON text is kept exactly, and null is JSON null', () =>
  withQueue(
    async (queue) => {
      const first = await queue.push(1);
      await (await queue.pull()).finish({ result: '{"a": 1,  "b": [true]}' });
      const second = await queue.push(2);
      await (await queue.pull()).finish({ result: null });
      const third = await queue.push(3);
      await (await queue.pull()).finish({ result: Buffer.from('[3]') });
      assert.equal((await queue.task(first)).rawResult, '{"a": 1,  "b": [true]}');
      assert.equal((await queue.task(second)).rawResult, 'null');
      assert.equal((await queue.task(second)).result, null);
      assert.deepEqual((await queue.task(third)).result, [3]);
      assert.deepEqual(
        (await queue.list('done')).map((snapshot) => snapshot.rawResult),
        ['{"a": 1,  "b": [true]}', 'null', '[3]'],
      );
    },
    { keepHistory: true },
  ));

test('a bad result changes nothing', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push(1);
      const task = await queue.pull();
      for (const [result, error, message] of [
        // The library's own message stays on the worker thread.
        ['{"a":', tq.InvalidJsonError, /^tq_finish_with_result: /],
        ['', tq.InvalidJsonError, /^tq_finish_with_result: /],
        ['{}\0{"a":1}', tq.InvalidJsonError, /NUL byte \(at byte 2\)/],
        [Buffer.from([0x22, 0xff, 0x22]), tq.InvalidArgumentError, /^tq_finish_with_result: /],
        [`"${'x'.repeat(40)}"`, tq.InvalidArgumentError, /^tq_finish_with_result: /],
        [() => {}, TypeError, /a payload must be JSON/],
      ]) {
        await assert.rejects(async () => task.finish({ result }), (thrown) => thrown instanceof error && message.test(thrown.message));
      }
      await assert.rejects(async () => task.finish('{"a":1}'), /finish takes an options object, not string/);
      await assert.rejects(async () => task.extend(1000, [1]), TypeError);
      assert.equal(task.closed, false);
      assert.equal((await queue.task(id)).state, 'leased');
      await task.finish({ result: true });
      assert.equal((await queue.task(id)).result, true);
    },
    { maxPayloadLen: 16 },
  ));

test('progress is read while the task runs', () =>
  withQueue(async (queue) => {
    const id = await queue.push({ encode: 1 });
    const task = await queue.pull();
    await task.extend(60_000, { progress: { done: 10 } });
    let snapshot = await queue.task(id);
    assert.equal(snapshot.state, 'leased');
    assert.deepEqual(snapshot.progress, { done: 10 });
    assert.equal(snapshot.result, undefined);
    await task.extend(60_000, { progress: '[20]' });
    await assert.rejects(async () => task.extend(60_000, { progress: 'nope' }), tq.InvalidJsonError);
    await task.extend(60_000);
    assert.equal((await queue.task(id)).rawProgress, '[20]');
    await queue.cancelTask(id);
    await assert.rejects(async () => task.extend(60_000, { progress: 30 }), tq.CancelledError);
  }));

test('wait resolves to the outcome once the task ends', () =>
  withQueue(async (queue) => {
    const id = await queue.push({ job: 1 });
    const task = await queue.pull();
    setTimeout(() => task.finish({ result: { ok: true } }), 100);
    const ended = await queue.wait(id, { timeout: 10_000 });
    assert.equal(ended.state, 'done');
    assert.deepEqual(ended.result, { ok: true });
    // An ended task answers at once, with or without a timeout.
    assert.deepEqual((await queue.wait(id)).result, { ok: true });
    assert.deepEqual((await queue.wait(id, { timeout: 0 })).result, { ok: true });
  }));

test('wait sees a dead task with its reason', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push(1);
      await (await queue.pull()).fail('broken');
      const ended = await queue.wait(id);
      assert.equal(ended.state, 'dead');
      assert.equal(ended.lastError, 'broken');
      assert.equal(ended.result, undefined);
    },
    { maxAttempts: 1 },
  ));

test('wait resolves to null when its timeout passes, and a waiting pull does not line up behind it', () =>
  withQueue(async (queue) => {
    const id = await queue.push(1);
    await queue.pull();
    const start = performance.now();
    const order = [];
    const waiting = queue.wait(id, { timeout: 1_000 }).then((outcome) => order.push(['wait', outcome]));
    const pulling = queue.pull({ wait: 10_000 }).then((task) => order.push(['pull', task.payload]));
    setTimeout(() => queue.push(2), 100);
    await Promise.all([waiting, pulling]);
    assert.deepEqual(order, [
      ['pull', 2],
      ['wait', null],
    ]);
    const waited = performance.now() - start;
    assert.ok(waited >= 990 && waited < 5_000, `waited ${waited} ms`);
    assert.equal(await queue.wait(id, { timeout: 0 }), null);
  }));

test('wait ends at once when its signal aborts', () =>
  withQueue(async (queue) => {
    const id = await queue.push(1);
    const stop = new AbortController();
    const waiting = queue.wait(id, { signal: stop.signal });
    setTimeout(() => stop.abort(new Error('stop waiting')), 100);
    const start = performance.now();
    await assert.rejects(waiting, /stop waiting/);
    assert.ok(performance.now() - start < 1_000);
    await assert.rejects(queue.wait(id, { signal: stop.signal }), /stop waiting/);
  }));

test('wait refuses a task it cannot see end', () =>
  withQueue(async (queue) => {
    const id = await queue.push(1);
    await assert.rejects(queue.wait(id + 1), { name: 'InvalidArgumentError', message: /no task/ });
    // Finished without a result and without history: not kept.
    await (await queue.pull()).finish();
    await assert.rejects(queue.wait(id), { name: 'InvalidArgumentError', message: /no task/ });
    await assert.rejects(queue.wait(id, { timeout: -1 }), tq.InvalidArgumentError);
    await assert.rejects(queue.wait('1'), TypeError);
  }));

test('a wait that saw the task takes its deletion for its end', async () => {
  const path = queuePath();
  const waiter = await tq.open(path);
  const worker = await tq.open(path);
  try {
    const id = await waiter.push({ n: 1 });
    const outcome = waiter.wait(id, { timeout: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Without history and without a result, the finish deletes the task.
    await (await worker.pull()).finish();
    const ended = await outcome;
    assert.equal(ended.id, id);
    assert.equal(ended.state, 'done');
    assert.equal(ended.result, undefined);
    assert.deepEqual(ended.payload, { n: 1 });
    await assert.rejects(waiter.wait(id), tq.InvalidArgumentError, 'gone before the wait began');
  } finally {
    await Promise.all([waiter.close(), worker.close()]);
  }
});

test('wait ends when the queue is closed or interrupted', async () => {
  for (const [stop, error] of [
    [(queue) => queue.close(), tq.ClosedError],
    [(queue) => queue.interrupt(), tq.InterruptedError],
  ]) {
    const queue = await tq.open(queuePath());
    const id = await queue.push(1);
    const waiting = queue.wait(id);
    setTimeout(() => stop(queue), 100);
    await assert.rejects(waiting, error);
    await queue.close();
    await assert.rejects(async () => queue.task(id), tq.ClosedError);
  }
});

test('resultRetention bounds how long a result is kept', async () => {
  await withQueue(
    async (queue) => {
      const first = await queue.push(1);
      await (await queue.pull()).finish({ result: 1 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      await queue.push(2);
      // A later finish with a result deletes the results whose time passed.
      await (await queue.pull()).finish({ result: 2 });
      assert.equal(await queue.task(first), null);
    },
    { resultRetention: 1 },
  );
  for (const retention of [0, -1, 367 * 24 * 3_600_000]) {
    await assert.rejects(async () => tq.open(queuePath(), { resultRetention: retention }), tq.InvalidArgumentError);
  }
});
