'use strict';
// Worker threads and child processes on one file, waking, aborting and
// closing waiting pulls, and the event loop kept running while pulls wait.

const test = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const { PACKAGE_DIR, queuePath, runNode, tq } = require('./helpers');

const PACKAGE = JSON.stringify(PACKAGE_DIR);

/** Asserts that `delivered` (arrays of ids) holds each of `ids` exactly once. */
function assertExactlyOnce(ids, delivered) {
  const all = delivered.flat();
  assert.equal(new Set(all).size, all.length, 'a task was delivered twice');
  assert.deepEqual([...all].sort((a, b) => a - b), [...ids].sort((a, b) => a - b));
}

// Drains the queue file argv[1]: pulls and finishes until none is ready,
// then prints the ids it finished as JSON.
const DRAIN = `
const tq = require(${PACKAGE});
const queue = await tq.open(process.argv[1], { busyTimeout: 30000 });
const ids = [];
for (let task; (task = await queue.pull()); ) { ids.push(task.id); await task.finish(); }
queue.close().then(() => console.log(JSON.stringify(ids)));
`;

test('four worker threads drain one file, each task once', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const ids = await queue.pushMany(Array.from({ length: 400 }, (_, i) => ({ i })));
  await queue.close();
  const code = `(async () => {${DRAIN}})();`.replace('process.argv[1]', 'require("node:worker_threads").workerData').replace(
    'console.log(JSON.stringify(ids))',
    'require("node:worker_threads").parentPort.postMessage(ids)',
  );
  const delivered = await Promise.all(
    Array.from(
      { length: 4 },
      () =>
        new Promise((resolve, reject) => {
          const worker = new Worker(code, { eval: true, workerData: path });
          worker.once('message', resolve);
          worker.once('error', reject);
        }),
    ),
  );
  assertExactlyOnce(ids, delivered);
});

test('child processes push and drain one file, each task once', async () => {
  const path = queuePath();
  const producer = `
    const tq = require(${PACKAGE});
    const queue = await tq.open(process.argv[1], { busyTimeout: 30000 });
    const ids = [];
    for (let i = 0; i < 150; i++) ids.push(await queue.push({ from: process.pid, i }));
    queue.close().then(() => console.log(JSON.stringify(ids)));
  `;
  // Consumers wait for tasks while the producers push, and stop after a
  // second without one; the parent drains what they left.
  const consumer = `
    const tq = require(${PACKAGE});
    const queue = await tq.open(process.argv[1], { busyTimeout: 30000 });
    (async () => {
      const ids = [];
      for await (const task of queue.tasks({ wait: 1000 })) { ids.push(task.id); await task.finish(); }
      await queue.close();
      console.log(JSON.stringify(ids));
    })();
  `;
  (await tq.open(path)).close();
  const runs = await Promise.all([
    runNode(producer, [path]),
    runNode(producer, [path]),
    runNode(consumer, [path]),
    runNode(consumer, [path]),
    runNode(consumer, [path]),
  ]);
  for (const run of runs) assert.equal(run.status, 0, run.stderr);
  const [pushedA, pushedB, ...consumed] = runs.map((run) => JSON.parse(run.stdout));
  const left = await runNode(DRAIN, [path]);
  assertExactlyOnce([...pushedA, ...pushedB], [...consumed, JSON.parse(left.stdout)]);
});

test('a push from another process wakes a waiting pull', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  try {
    const waiting = queue.pull({ wait: 120_000 });
    const pusher = runNode(`const tq = require(${PACKAGE}); const q = await tq.open(process.argv[1]); console.log(await q.push({ from: 'child' }));`, [path]);
    const task = await waiting;
    const pushed = await pusher;
    assert.equal(pushed.status, 0, pushed.stderr);
    assert.notEqual(task, null, 'the wait ran out instead of waking');
    assert.equal(task.id, Number(pushed.stdout));
    assert.deepEqual(task.payload, { from: 'child' });
    await task.finish();
  } finally {
    await queue.close();
  }
});

test('aborting a waiting pull rejects it with the reason and claims nothing; the others keep waiting', async () => {
  const queue = await tq.open(queuePath());
  try {
    const stop = new AbortController();
    const aborted = queue.pull({ wait: 120_000, signal: stop.signal });
    const lined = queue.pull({ wait: 120_000, signal: stop.signal });
    const other = queue.pull({ wait: 120_000 });
    setImmediate(() => stop.abort());
    for (const result of await Promise.allSettled([aborted, lined])) {
      assert.equal(result.status, 'rejected');
      assert.equal(result.reason.name, 'AbortError');
    }
    await queue.push({ n: 1 });
    const task = await other;
    assert.deepEqual(task.payload, { n: 1 });
    await task.finish();
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  } finally {
    await queue.close();
  }
});

test('close() during waits rejects every waiting pull, ends tasks() and then frees the handle', async () => {
  const path = queuePath();
  const queue = await tq.open(path);
  const pulls = Promise.allSettled([queue.pull({ wait: 120_000 }), queue.pull({ wait: Infinity }), queue.pullMany(5, { wait: 120_000 })]);
  const iterated = (async () => {
    for await (const task of queue.tasks()) assert.fail(`no task was pushed: ${task.raw}`);
    return 'ended';
  })();
  await new Promise((resolve) => setImmediate(resolve));
  await queue.close();
  for (const result of await pulls) {
    assert.equal(result.status, 'rejected');
    assert.ok(result.reason instanceof tq.ClosedError, String(result.reason));
  }
  assert.equal(await iterated, 'ended');
  const reopened = await tq.open(path);
  assert.deepEqual(await reopened.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  await reopened.close();
});

test('a 10 ms timer keeps firing while 4 pulls wait, on one queue and on four', async () => {
  const path = queuePath();
  const one = await tq.open(path);
  const four = await Promise.all(Array.from({ length: 4 }, () => tq.open(path)));
  try {
    for (const waiters of [[one, one, one, one], four]) {
      const pulls = waiters.map((queue) => queue.pull({ wait: 120_000 }));
      // Twenty ticks can only come if the event loop runs while they wait.
      await new Promise((resolve) => {
        let ticks = 0;
        const timer = setInterval(() => {
          if (++ticks === 20) {
            clearInterval(timer);
            resolve();
          }
        }, 10);
      });
      await one.pushMany([1, 2, 3, 4]);
      const tasks = await Promise.all(pulls);
      assert.ok(tasks.every((task) => task !== null));
      await one.finishMany(tasks);
    }
  } finally {
    await Promise.all([one, ...four].map((queue) => queue.close()));
  }
});

test('the process exits while pulls wait: on process.exit() and on an uncaught exception', async () => {
  const path = queuePath();
  for (const [ending, status] of [
    ['process.exit(3)', 3],
    ["throw new Error('boom')", 1],
  ]) {
    const code = `
      const tq = require(${PACKAGE});
      const one = await tq.open(process.argv[1]);
      const other = await tq.open(process.argv[1]);
      one.pull({ wait: Infinity });
      other.pull({ wait: 3_600_000 });
      setTimeout(() => { ${ending}; }, 20);
    `;
    // Node joins libuv's worker threads before it exits: a wait that went
    // on would hold the process for its hour. Past 20 s it is killed.
    const run = await runNode(code, [path], { killAfter: 20_000 });
    assert.equal(run.signal, null, `${ending}: the process did not exit`);
    assert.equal(run.status, status, run.stderr);
  }
});
