'use strict';
// The event loop keeps running while calls wait for another process's write
// lock, and waits for outcomes never starve libuv's pool.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { PACKAGE_DIR, childEnv, queuePath, runNode, tq } = require('./helpers');

/** Holds the write lock of the SQLite file at `path` for `seconds`, from a
 * Python process; resolves to the child once it holds the lock. */
function holdWriteLock(path, seconds) {
  const code = [
    'import sqlite3, sys, time',
    'db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)',
    "db.execute('BEGIN IMMEDIATE')",
    "print('locked', flush=True)",
    'time.sleep(float(sys.argv[2]))',
    "db.execute('COMMIT')",
  ].join('\n');
  const child = spawn('python3', ['-c', code, path, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', () => resolve({ exited }));
  });
}

/** The `p`-th percentile of `values`. */
function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

test('a 10 ms timer stays on time while pushes, finishes and extends wait for another process holding the lock', async (t) => {
  const path = queuePath();
  const queue = await tq.open(path, { busyTimeout: 10_000 });
  try {
    await queue.pushMany([1, 2, 3]);
    const [finished, extended] = await queue.pullMany(2);
    const { exited } = await holdWriteLock(path, 1.5);

    const lateness = [];
    let last = performance.now();
    const timer = setInterval(() => {
      const at = performance.now();
      lateness.push(at - last - 10);
      last = at;
    }, 10);
    const started = performance.now();
    const waited = await Promise.all([
      queue.push(4).then(() => performance.now() - started),
      queue.pushMany([5, 6]).then(() => performance.now() - started),
      finished.finish().then(() => performance.now() - started),
      extended.extend(30_000).then(() => performance.now() - started),
    ]);
    clearInterval(timer);
    await exited;

    // Every call waited for the lock, so the timer ran while they waited.
    for (const ms of waited) assert.ok(ms > 1000, `a call returned after ${ms.toFixed(0)} ms, before the lock was released`);
    assert.ok(lateness.length > 100, `the timer fired ${lateness.length} times in ${Math.max(...waited).toFixed(0)} ms`);
    // A call on the event loop would have held the timer for the whole
    // 1.5 s (1,486 ms late, measured with pushSync). The timer's lateness
    // on a quiet machine (p99 about 3 ms) is the benchmark's to report
    // (make bench-node); here, where other tests and jobs share 2 cores and
    // a tick is sometimes 15 ms late, the bound only tells a blocked loop
    // from a running one.
    const p99 = percentile(lateness, 99);
    const max = Math.max(...lateness);
    t.diagnostic(`timer lateness while the lock was held: p50 ${percentile(lateness, 50).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ${max.toFixed(2)} ms`);
    assert.ok(max < 500, `the timer was once ${max.toFixed(1)} ms late: a call blocked the event loop`);
    await extended.finish();
  } finally {
    await queue.close();
  }
});

// Four tasks due in 300 ms, waited for by `waits` wait() calls on one Queue,
// worked by runWorker on another Queue of the same process (the starvation
// of review R8: each wait held one of libuv's threads, so the worker's pull
// never ran and the waits ran out).
const STARVATION = `
const tq = require(${JSON.stringify(PACKAGE_DIR)});
const [path, waits] = [process.argv[1], Number(process.argv[2])];
const waiter = await tq.open(path, { keepHistory: true });
const workerQueue = await tq.open(path, { keepHistory: true });
const ids = await waiter.pushMany([1, 2, 3, 4], { delay: 300 });
const started = Date.now();
const outcomes = Promise.all(Array.from({ length: waits }, (_, i) => waiter.wait(ids[i % 4], { timeout: 10_000 })));
await new Promise((resolve) => setTimeout(resolve, 50));
const stop = new AbortController();
const worker = tq.runWorker(workerQueue, async () => 'ok', { concurrency: 1, signal: stop.signal, stopOnSignals: false });
const states = (await outcomes).map((task) => (task ? task.state : null));
console.log(JSON.stringify({ ms: Date.now() - started, done: states.filter((state) => state === 'done').length }));
stop.abort();
await worker;
await waiter.close();
await workerQueue.close();
`;

for (const waits of [4, 100]) {
  test(`${waits} waits and a worker in one process, with libuv's default pool, end as the tasks are done`, async () => {
    const run = await runNode(STARVATION, [queuePath(), String(waits)], {
      env: childEnv({ UV_THREADPOOL_SIZE: undefined }),
      killAfter: 30_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const { ms, done } = JSON.parse(run.stdout);
    assert.equal(done, waits, `only ${done} of ${waits} waits saw their task done`);
    // The tasks are due at 300 ms; a starved wait would run out at 10 s.
    assert.ok(ms < 5000, `the waits ended after ${ms} ms`);
  });
}
