'use strict';
// runWorker: concurrent handlers, finishing and failing, heartbeats while a
// handler is pending, and a graceful stop on SIGTERM.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { PACKAGE_DIR, queuePath, runNode, tq } = require('./helpers');

test('up to `concurrency` handlers run at once; resolved tasks finish, thrown ones fail', async () => {
  const queue = await tq.open(queuePath(), { maxAttempts: 1 });
  try {
    await queue.pushMany(Array.from({ length: 20 }, (_, i) => ({ i })));
    const stop = new AbortController();
    let running = 0;
    let most = 0;
    let seen = 0;
    const stats = await tq.runWorker(
      queue,
      async (task) => {
        most = Math.max(most, ++running);
        await sleep(5);
        running--;
        if (++seen === 20) stop.abort();
        if (task.payload.i % 5 === 0) throw new Error(`task ${task.payload.i} is bad`);
      },
      { concurrency: 4, signal: stop.signal, stopOnSignals: false },
    );
    assert.equal(most, 4);
    assert.deepEqual(stats, { finished: 16, failed: 4, lost: 0 });
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 4, cancelled: 0 });
    assert.deepEqual(
      (await queue.list('dead')).map((task) => task.lastError),
      ['Error: task 0 is bad', 'Error: task 5 is bad', 'Error: task 10 is bad', 'Error: task 15 is bad'],
    );
  } finally {
    await queue.close();
  }
});

test('the tasks of all free handlers are claimed in one call, never more than are free', async () => {
  const queue = await tq.open(queuePath());
  try {
    await queue.pushMany(Array.from({ length: 12 }, (_, i) => ({ i })));
    // Claims come from commits that finish the tasks of the handlers that
    // returned (and from a waiting pull when none is ready).
    const claims = [];
    const finishAndClaim = queue._finishAndClaim.bind(queue);
    queue._finishAndClaim = (tasks, n, lease) =>
      finishAndClaim(tasks, n, lease).then(async ([outcomes, claimed]) => {
        if (n) claims.push({ asked: n, got: claimed.length, leased: await queue.count('leased') });
        return [outcomes, claimed];
      });
    const pullMany = queue.pullMany.bind(queue);
    queue.pullMany = (n, options) =>
      pullMany(n, options).then(async (tasks) => {
        claims.push({ asked: n, got: tasks.length, leased: await queue.count('leased') });
        return tasks;
      });
    const stop = new AbortController();
    let seen = 0;
    await tq.runWorker(
      queue,
      async () => {
        await sleep(5);
        if (++seen === 12) stop.abort();
      },
      { concurrency: 4, signal: stop.signal, stopOnSignals: false },
    );
    assert.deepEqual(claims[0], { asked: 4, got: 4, leased: 4 });
    assert.ok(claims.length <= 9, `12 tasks took ${claims.length} claims: ${JSON.stringify(claims)}`);
    for (const claim of claims) {
      assert.ok(claim.leased <= 4, `more tasks held than handlers: ${JSON.stringify(claim)}`);
    }
    assert.equal(await queue.count('pending') + await queue.count('leased'), 0);
  } finally {
    await queue.close();
  }
});

test('a handler pending past its lease keeps the task through heartbeats', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const other = await tq.open(path);
  try {
    await queue.push({ slow: true });
    const stop = new AbortController();
    const worker = tq.runWorker(
      queue,
      async () => {
        // Three leases long: without heartbeats the lease would have run out.
        await sleep(1500);
        assert.equal(await other.recover(), 0);
        assert.equal(await other.pull(), null);
        stop.abort();
      },
      { lease: 500, heartbeat: 50, signal: stop.signal, stopOnSignals: false },
    );
    assert.deepEqual(await worker, { finished: 1, failed: 0, lost: 0 });
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('SIGTERM stops taking tasks, lets the running handler finish, and resolves', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  await queue.pushMany([1, 2, 3, 4, 5]);
  await queue.close();
  const code = `
    const tq = require(${JSON.stringify(PACKAGE_DIR)});
    const queue = await tq.open(process.argv[1]);
    tq.runWorker(queue, async (task) => {
      process.kill(process.pid, 'SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }, { concurrency: 1 }).then(async (stats) => {
      console.log(JSON.stringify(stats));
      await queue.close();
    });
  `;
  const run = await runNode(code, [path]);
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), { finished: 1, failed: 0, lost: 0 });
  const reopened = await tq.open(path);
  assert.deepEqual(await reopened.counts(), { pending: 4, leased: 0, done: 0, dead: 0, cancelled: 0 });
  await reopened.close();
});

test('bad worker options are refused', async () => {
  const queue = await tq.open(queuePath());
  try {
    await assert.rejects(tq.runWorker(queue, () => {}, { concurrency: 0 }), tq.InvalidArgumentError);
    await assert.rejects(tq.runWorker(queue, 'handler'), TypeError);
  } finally {
    await queue.close();
  }
});

test("a task cancelled while its handler runs aborts the handler's signal", async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const other = await tq.open(path);
  try {
    const id = await queue.push({ long: true });
    const stop = new AbortController();
    const errors = [];
    const stats = await tq.runWorker(
      queue,
      async (task, { signal }) => {
        assert.equal(await other.cancelTask(task.id, 'not wanted'), 'leased');
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        assert.ok(signal.reason instanceof tq.CancelledError, String(signal.reason));
        stop.abort();
      },
      { heartbeat: 10, signal: stop.signal, stopOnSignals: false, onError: (error) => errors.push(error) },
    );
    // The heartbeat found it cancelled; finishing it then could not.
    assert.deepEqual(stats, { finished: 0, failed: 0, lost: 1 });
    assert.deepEqual(
      errors.map((error) => error.name),
      ['CancelledError', 'CancelledError'],
    );
    assert.equal(await queue.count('pending') + await queue.count('leased'), 0, `task ${id} is still in line`);
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('an onError that throws is reported as a warning and the worker goes on', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const other = await tq.open(path);
  const warnings = [];
  const onWarning = (warning) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    await queue.pushMany(['"cancelled"', '"next"']);
    const stop = new AbortController();
    const handled = [];
    const stats = await tq.runWorker(
      queue,
      async (task, { signal }) => {
        handled.push(task.payload);
        if (task.payload === 'cancelled') {
          // Its next heartbeat fails, and onError throws.
          await other.cancelTask(task.id);
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        } else {
          stop.abort();
        }
      },
      {
        concurrency: 1,
        heartbeat: 10,
        signal: stop.signal,
        stopOnSignals: false,
        onError: () => {
          throw new Error('the logger is down');
        },
      },
    );
    assert.deepEqual(handled, ['cancelled', 'next']);
    assert.deepEqual(stats, { finished: 1, failed: 0, lost: 1 });
    await new Promise((resolve) => setImmediate(resolve));
    const reported = warnings.filter((warning) => warning.name === 'TqWarning');
    assert.ok(reported.length >= 1, 'no warning');
    assert.match(reported[0].message, /onError threw .*the logger is down/);
    assert.equal(reported[0].cause.message, 'the logger is down');
  } finally {
    process.off('warning', onWarning);
    await Promise.all([queue.close(), other.close()]);
  }
});

test("one task's heartbeat stuck in extend delays no other task's", async () => {
  const queue = await tq.open(queuePath());
  try {
    await queue.pushMany(['"stuck"', '"beating"']);
    const extends_ = { stuck: 0, beating: 0 };
    const stop = new AbortController();
    let running = 0;
    await tq.runWorker(
      queue,
      async (task) => {
        const extend = task.extend.bind(task);
        task.extend = (...args) => {
          extends_[task.payload]++;
          // An extend that never returns, as one waiting for a lock would.
          return task.payload === 'stuck' ? new Promise(() => {}) : extend(...args);
        };
        running++;
        await new Promise((resolve) => setTimeout(resolve, 300));
        if (--running === 0) stop.abort();
      },
      { concurrency: 2, heartbeat: 20, signal: stop.signal, stopOnSignals: false },
    );
    // The stuck heartbeat is not called again while its extend is pending;
    // the other beats on its own timer.
    assert.equal(extends_.stuck, 1);
    assert.ok(extends_.beating >= 5, `the other task was extended ${extends_.beating} times in 300 ms`);
  } finally {
    await queue.close();
  }
});
